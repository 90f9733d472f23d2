#!/bin/bash
# /opt/entrypoint.sh of the local Spark base image (localhost/dv-spark, built by
# stack/dvstack/images/build.py), standing in for the official Spark image's entry point.
#
# Spark's Kubernetes backend starts every pod of an application with this image's
# entry point and one of two first arguments ("Running on Kubernetes", custom images):
#
#   driver ARGS...   the driver pod: ARGS are spark-submit's (--properties-file, --class,
#                    the application and its arguments). The submission already chose
#                    cluster mode; inside the pod the driver runs in client mode, bound to
#                    the pod's IP (SPARK_DRIVER_BIND_ADDRESS, from status.podIP).
#   executor         an executor pod: a JVM running KubernetesExecutorBackend, configured
#                    only by the environment the backend gives the pod: SPARK_DRIVER_URL,
#                    SPARK_EXECUTOR_ID, SPARK_EXECUTOR_CORES, SPARK_EXECUTOR_MEMORY,
#                    SPARK_APPLICATION_ID, SPARK_EXECUTOR_POD_IP, SPARK_EXECUTOR_POD_NAME,
#                    SPARK_RESOURCE_PROFILE_ID, SPARK_CLASSPATH (spark.executor.extraClassPath),
#                    SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... (one JVM option each, in order)
#                    and SPARK_CONF_DIR (the mounted spark.properties).
#
# Anything else is run as given. The command runs under tini (reaping the JVM's and
# Python workers' orphans) when the image has it.
set -euo pipefail

spark_home="${SPARK_HOME:-/opt/spark}"

# A pod may run the image as a uid it does not know; the JVM then has no user name,
# which Hadoop's login refuses. Name it when /etc/passwd can be written.
uid="$(id -u)"
if ! getent passwd "$uid" >/dev/null 2>&1; then
  if [[ -w /etc/passwd ]]; then
    printf '%s:x:%s:%s:%s:%s:/usr/sbin/nologin\n' "$uid" "$uid" "$(id -g)" \
      "${SPARK_USER_NAME:-anonymous uid}" "$spark_home" >>/etc/passwd
  else
    echo "entrypoint: uid $uid has no passwd entry and /etc/passwd is read-only" >&2
  fi
fi

# Joins its non-empty arguments with ':' (an empty classpath entry would mean the
# working directory to the JVM).
join_classpath() {
  local out="" part
  for part in "$@"; do
    [[ -n "$part" ]] && out="${out:+$out:}$part"
  done
  printf '%s' "$out"
}

# SPARK_JAVA_OPT_<n> in numeric order of n, one array element each (options may hold spaces).
java_opts=()
while read -r name; do
  [[ -n "$name" ]] && java_opts+=("${!name}")
done < <(compgen -v SPARK_JAVA_OPT_ | grep -E '^SPARK_JAVA_OPT_[0-9]+$' | sort -t_ -k4,4n || true)

require() { # require NAME...: refuse to start an executor without what the backend sets
  local name
  for name in "$@"; do
    if [[ -z "${!name:-}" ]]; then
      echo "entrypoint: executor mode needs $name in the environment" \
        "(Spark's Kubernetes backend sets it on executor pods)" >&2
      exit 64
    fi
  done
}

mode="${1:-}"
case "$mode" in
  driver)
    shift
    cmd=("$spark_home/bin/spark-submit")
    if [[ -n "${SPARK_DRIVER_BIND_ADDRESS:-}" ]]; then
      cmd+=(--conf "spark.driver.bindAddress=$SPARK_DRIVER_BIND_ADDRESS")
    fi
    cmd+=(--deploy-mode client "$@")
    ;;
  executor)
    shift
    require SPARK_DRIVER_URL SPARK_EXECUTOR_ID SPARK_EXECUTOR_CORES SPARK_EXECUTOR_MEMORY \
      SPARK_APPLICATION_ID SPARK_EXECUTOR_POD_IP
    conf_dir="${SPARK_CONF_DIR:-$spark_home/conf}"
    classpath="$(join_classpath "$conf_dir" "${HADOOP_CONF_DIR:-}" "${SPARK_CLASSPATH:-}" \
      "$spark_home/jars/*" "${SPARK_EXTRA_CLASSPATH:-}" "${SPARK_DIST_CLASSPATH:-}")"
    java="${JAVA_HOME:+$JAVA_HOME/bin/}java"
    cmd=("$java" "${java_opts[@]}"
      "-Xms$SPARK_EXECUTOR_MEMORY" "-Xmx$SPARK_EXECUTOR_MEMORY"
      -cp "$classpath"
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend
      --driver-url "$SPARK_DRIVER_URL"
      --executor-id "$SPARK_EXECUTOR_ID"
      --cores "$SPARK_EXECUTOR_CORES"
      --app-id "$SPARK_APPLICATION_ID"
      --hostname "$SPARK_EXECUTOR_POD_IP"
      --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}")
    if [[ -n "${SPARK_EXECUTOR_POD_NAME:-}" ]]; then
      cmd+=(--podName "$SPARK_EXECUTOR_POD_NAME")
    fi
    ;;
  "")
    echo "usage: /opt/entrypoint.sh driver SPARK-SUBMIT-ARGS... | executor | COMMAND [ARGS...]" >&2
    exit 64
    ;;
  *)
    cmd=("$@")
    ;;
esac

if [[ "$mode" == driver || "$mode" == executor ]]; then
  echo "entrypoint: $mode: ${cmd[0]}" >&2
fi
if [[ -x /usr/bin/tini ]]; then
  exec /usr/bin/tini -s -- "${cmd[@]}"
fi
exec "${cmd[@]}"
