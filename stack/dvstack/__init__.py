"""The local stack: real Kubernetes API, Kafka, PostgreSQL and a stand-in Spark Operator as local processes."""
