"""The stack's services, each a real process on loopback: the Kubernetes API (etcd,
kube-apiserver, kube-controller-manager), Kafka and Kafka Connect with Debezium, PostgreSQL,
OpenSearch, S3Proxy and the schema registry; restarting one with its state (`restarts`)."""
