#!/usr/bin/env bash
# Build what the local stack's node runs that Debian does not package, once,
# into the cache: kubelet, kube-proxy and kube-scheduler (build-kube.sh node),
# CoreDNS and crictl from the Go module proxy, and the pod sandbox's pause
# binary from stack/node/pause.go.  containerd, runc and the CNI plugins come
# from Debian's packages (containerd, runc, containernetworking-plugins).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
KUBE_VERSION="${KUBE_VERSION:-v1.34.4}"
COREDNS_VERSION="${COREDNS_VERSION:-v1.15.0}"
CRICTL_VERSION="${CRICTL_VERSION:-v1.34.0}"
CACHE_DIR="${DV_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/derived-views}"
BIN_DIR="$CACHE_DIR/node-$KUBE_VERSION/bin"
mkdir -p "$BIN_DIR"

kube_bin="$(bash "$HERE/build-kube.sh" node | tail -1)"
for b in kubelet kube-proxy kube-scheduler; do ln -sf "$kube_bin/$b" "$BIN_DIR/$b"; done

export CGO_ENABLED=0 GOFLAGS="" GO111MODULE=on
coredns_sum="$(sha256sum "$HERE/node/coredns/main.go" | cut -c1-12)"
if [[ ! -x "$BIN_DIR/coredns-$coredns_sum" ]]; then
  # Our own main with the Corefile's plugins only, at the pinned CoreDNS: its go.mod
  # (no replace directives) decides every other version, as `go install` would.
  work="$(mktemp -d)"
  cp "$HERE/node/coredns/main.go" "$work/main.go"
  (cd "$work" && go mod init derivedviews.local/coredns 2>/dev/null \
     && go get "github.com/coredns/coredns@$COREDNS_VERSION" 2>/dev/null \
     && go mod tidy \
     && go build -trimpath -ldflags "-s -w" -o "$BIN_DIR/coredns-$coredns_sum.partial" .)
  rm -rf "$work"
  mv "$BIN_DIR/coredns-$coredns_sum.partial" "$BIN_DIR/coredns-$coredns_sum"
fi
ln -sf "coredns-$coredns_sum" "$BIN_DIR/coredns"
if [[ ! -x "$BIN_DIR/crictl" ]]; then
  GOBIN="$BIN_DIR" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
fi
pause_sum="$(sha256sum "$HERE/node/pause.go" | cut -c1-12)"
if [[ ! -x "$BIN_DIR/pause-$pause_sum" ]]; then
  work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
  cp "$HERE/node/pause.go" "$work/main.go"
  (cd "$work" && go mod init derivedviews.local/pause >/dev/null 2>&1 \
     && go build -trimpath -ldflags "-s -w" -o "$BIN_DIR/pause-$pause_sum" .)
fi
ln -sf "pause-$pause_sum" "$BIN_DIR/pause"
echo "$BIN_DIR"
