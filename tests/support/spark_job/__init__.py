"""The Spark job's test helpers: submitting a job, Kafka records, PostgreSQL sink samples
and sample Python transforms."""
