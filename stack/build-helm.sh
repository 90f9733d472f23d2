#!/usr/bin/env bash
# Build helm (v3) from the Go module proxy, once, into the cache.
#
# Same pattern as build-kube.sh: a small generated module requires
# helm.sh/helm/v3 at the pinned version, and `go build` builds its cmd/helm.
# The ldflags mirror what helm's own Makefile stamps in: the version (so
# `helm version` is honest) and the default Kubernetes version used by
# `helm template` / `helm lint` (one minor above its client-go's v0.x).
# Prints the bin dir; a no-op when the binary is already there.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
CACHE_DIR="${DV_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/derived-views}"
BIN_DIR="$CACHE_DIR/helm-$HELM_VERSION/bin"

if [[ -x "$BIN_DIR/helm" ]]; then echo "$BIN_DIR"; exit 0; fi

command -v go >/dev/null || { echo "build-helm: 'go' not found; install Go >= 1.26 (Debian: golang-go)" >&2; exit 1; }

WORK="$CACHE_DIR/helm-$HELM_VERSION/src"
mkdir -p "$WORK" "$BIN_DIR"

# Parallel test workers ask for helm at the same moment on a cold cache: one builds, the
# others wait here and take its binary (two builds into one directory: the first renamed
# helm.partial, the second's rename found nothing and failed every chart test's setup).
exec 9>"$CACHE_DIR/helm-$HELM_VERSION/build.lock"
flock 9
if [[ -x "$BIN_DIR/helm" ]]; then echo "$BIN_DIR"; exit 0; fi
cd "$WORK"

cat > go.mod <<MOD
module derivedviews.local/helmbuild

go 1.26.0

require helm.sh/helm/v3 $HELM_VERSION
MOD
cat > tools.go <<'GO'
//go:build tools

package tools

import _ "helm.sh/helm/v3/cmd/helm"
GO
GOFLAGS=-mod=mod go mod tidy -e >/dev/null

client_go="$(go list -m -f '{{.Version}}' k8s.io/client-go)"   # v0.<minor>.<patch>
k8s_minor="${client_go#v0.}"; k8s_minor="${k8s_minor%%.*}"
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done

# Build to a temporary name and rename, so an interrupted build is never
# mistaken for a finished one by the check at the top.
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$BIN_DIR/helm.partial" helm.sh/helm/v3/cmd/helm
mv "$BIN_DIR/helm.partial" "$BIN_DIR/helm"
"$BIN_DIR/helm" version --short >&2
echo "$BIN_DIR"
