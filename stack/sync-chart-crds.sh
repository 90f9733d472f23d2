#!/usr/bin/env bash
# Copy the generated CRDs (crds/*.yaml at the repo root) into the Helm chart,
# which must carry identical copies (tests/unit/chart/test_chart_crds_in_sync.py
# checks). The chart's own extra CRDs (Kopf's peering kinds) are left alone.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$REPO/crds"
DEST="$REPO/charts/derived-views/crds"

mkdir -p "$DEST"
shopt -s nullglob
files=("$SRC"/*.yaml)
if (( ${#files[@]} == 0 )); then
  echo "sync-chart-crds: no crds/*.yaml yet; nothing to copy" >&2
  exit 0
fi
for f in "${files[@]}"; do
  if ! cmp -s "$f" "$DEST/$(basename "$f")"; then
    cp "$f" "$DEST/"
    echo "updated charts/derived-views/crds/$(basename "$f")"
  fi
done
