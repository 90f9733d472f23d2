#!/bin/bash
# /opt/decom.sh of the local Spark base image (localhost/dv-spark), standing in for the
# official image's: Spark's Kubernetes backend makes it the preStop hook of executor pods
# when spark.decommission.enabled is set (spark.kubernetes.decommission.script). It asks
# the executor to decommission (SIGPWR, which the executor handles by migrating its blocks
# and leaving) and waits for the JVM to exit, within the pod's termination grace period.
set -u
pid="$(pgrep -f org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend | head -n 1)"
if [[ -z "$pid" ]]; then
  echo "decom: no executor process" >&2
  exit 0
fi
echo "decom: asking executor $pid to decommission" >&2
kill -s PWR "$pid" || exit 0
while kill -0 "$pid" 2>/dev/null; do
  sleep 1
done
echo "decom: executor $pid exited" >&2
