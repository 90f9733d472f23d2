"""One revision's job as the operator renders it: the SparkApplication (`sparkapplication`)
with the job's configuration document (`job_config`), where its checkpoints live
(`checkpoints`), and what the Spark Operator's states mean for the planner (`job_state`)."""
