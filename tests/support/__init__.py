"""What tests share: the planner's simulated world (`world`), the hostile corpora
(`corpora`), the e2e and fault suites' helpers, stand-ins of adapters behind the shell's
ports (`stand_ins`), and the Spark job's test helpers (`spark_job`)."""
