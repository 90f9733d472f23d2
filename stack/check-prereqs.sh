#!/usr/bin/env bash
# Check the machine has what `make` needs, naming the package to install when not.
set -uo pipefail
missing=0
need() { # need CMD "what to install"
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "missing: '$1' — install $2" >&2; missing=1
  fi
}
py="${PYTHON:-python3}"
if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "missing: Python >= 3.11 as '$py' — install python3 (3.11+) or set PYTHON=/path/to/python3.11" >&2; missing=1
elif ! "$py" -c 'import venv, ensurepip' 2>/dev/null; then
  echo "missing: the venv module for $py — install the Debian package python3-venv" >&2; missing=1
fi
need java "a Java 17+ runtime (Debian package: openjdk-17-jre-headless)"
if command -v java >/dev/null 2>&1; then
  jv="$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)"
  if [[ -n "$jv" && "$jv" -lt 17 ]]; then echo "missing: Java >= 17 (found $jv) — install openjdk-17-jre-headless" >&2; missing=1; fi
fi
need mvn "Maven (Debian package: maven)"
need openssl "OpenSSL (Debian package: openssl)"
need kubectl "kubectl (the chart tests run kubectl auth can-i)"
if [[ -z "${KUBEBUILDER_ASSETS:-}" ]]; then
  need go "Go >= 1.26 to build kube-apiserver, etcd and helm once (or set KUBEBUILDER_ASSETS to envtest binaries)"
fi
if command -v go >/dev/null 2>&1; then
  gv="$(go env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p')"
  if [[ -n "$gv" && "$gv" -lt 26 ]]; then echo "missing: Go >= 1.26 (found 1.$gv) — helm v3.22 needs it" >&2; missing=1; fi
fi
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then
  echo "missing: PostgreSQL server binaries (initdb, pg_ctl) — install the Debian package postgresql" >&2; missing=1
fi
if [[ "$(id -u)" == 0 ]] && ! id postgres >/dev/null 2>&1; then
  echo "missing: a 'postgres' user to run PostgreSQL as (we are root) — install the Debian package postgresql" >&2; missing=1
fi
exit "$missing"
