"""The real node: containerd and runc, the CNI bridge, kubelet, kube-proxy, kube-scheduler,
CoreDNS and the real Kubeflow Spark Operator as pods (`daemons`), their settings (`config`),
what they add to the host and how it is given back (`host`), and what tests need of it
(`support`). `python -m dvstack.node check` compares the host with its snapshot."""
