"""Spark on the stack: the Kubeflow Spark Operator's CRD (`crd`) and state machine, the
stand-in that runs each driver as `spark-submit --master local[N]` and plays the kubelet
(`stand_in`, `local_kubelet`, `kubelet_model`, `driver_pod`, `secret_volumes`), the real
Kubeflow Spark Operator's chart and image for the node (`kubeflow_operator`), and the
drivers' JVM settings (`jvm`, `jvm_training`, `local_command`)."""
