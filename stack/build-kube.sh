#!/usr/bin/env bash
# Build etcd, kube-apiserver and kube-controller-manager (or, with the argument
# `node`, kubelet, kube-proxy and kube-scheduler) from the Go module proxy (the
# envtest pattern without a download site), once, into the cache.
#
# k8s.io/kubernetes is not meant to be imported: its go.mod replaces every
# staging module (k8s.io/api, apimachinery, ...) with a local path.  We derive
# that list from the pinned version's go.mod and replace each one with the
# published v0.x.y instead.  etcd is built from go.etcd.io/etcd/server/v3 at
# the version Kubernetes itself requires, in the same module, so MVS keeps
# both on one dependency graph.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.34.4}"
CACHE_DIR="${DV_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/derived-views}"
BIN_DIR="$CACHE_DIR/kube-$KUBE_VERSION/bin"
PART="${1:-control-plane}"
case "$PART" in
  control-plane) WANT=(etcd kube-apiserver kube-controller-manager); SRC=src ;;
  node) WANT=(kubelet kube-proxy kube-scheduler); SRC=src-node ;;
  *) echo "build-kube: unknown part '$PART' (control-plane or node)" >&2; exit 2 ;;
esac

have_all() { for b in "${WANT[@]}"; do [[ -x "$BIN_DIR/$b" ]] || return 1; done; }
if have_all; then echo "$BIN_DIR"; exit 0; fi

command -v go >/dev/null || { echo "build-kube: 'go' not found; install Go >= 1.24 (Debian: golang-go) or set KUBEBUILDER_ASSETS" >&2; exit 1; }

STAGING_VERSION="v0.${KUBE_VERSION#v1.}"
KUBE_MINOR="${KUBE_VERSION#v1.}"; KUBE_MINOR="${KUBE_MINOR%%.*}"
WORK="$CACHE_DIR/kube-$KUBE_VERSION/$SRC"
mkdir -p "$WORK/cmd/etcd" "$BIN_DIR"
cd "$WORK"

gomod_path="$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
[[ -f "$gomod_path" ]] || { echo "build-kube: could not download k8s.io/kubernetes@$KUBE_VERSION" >&2; exit 1; }

{
  echo "module derivedviews.local/kubebuild"
  echo
  echo "go 1.24.0"
  echo
  echo "require k8s.io/kubernetes $KUBE_VERSION"
  echo
  sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#replace \1 => \1 '"$STAGING_VERSION"'#p' "$gomod_path"
} > go.mod
grep -q '^replace k8s.io/api ' go.mod || { echo "build-kube: no staging replaces found in $gomod_path" >&2; exit 1; }

{
  echo "//go:build tools"
  echo
  echo "package tools"
  echo
  echo "import ("
  for b in "${WANT[@]}"; do [[ "$b" == etcd ]] || echo "	_ \"k8s.io/kubernetes/cmd/$b\""; done
  echo ")"
} > tools.go
cat > cmd/etcd/main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO

# Pin etcd's server module to the version kubernetes requires.
etcd_version="$(sed -n 's#^\s*go.etcd.io/etcd/server/v3 \(v[0-9.]*\).*#\1#p' "$gomod_path" | head -1)"
go mod edit -require="go.etcd.io/etcd/server/v3@$etcd_version"
GOFLAGS=-mod=mod go mod tidy -e >/dev/null

export CGO_ENABLED=0
ldflags="-s -w"
kube_pkgs=()
for b in "${WANT[@]}"; do [[ "$b" == etcd ]] || kube_pkgs+=("k8s.io/kubernetes/cmd/$b"); done
go build -trimpath -ldflags "$ldflags -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$KUBE_MINOR" \
  -o "$BIN_DIR/" "${kube_pkgs[@]}"
if [[ " ${WANT[*]} " == *" etcd "* ]]; then go build -trimpath -ldflags "$ldflags" -o "$BIN_DIR/etcd" ./cmd/etcd; fi
have_all
echo "$BIN_DIR"
