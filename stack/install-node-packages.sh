#!/usr/bin/env bash
# Install, from Debian's packages, what the local stack's real node and its image builds
# need and Debian packages: containerd and runc, the CNI plugins, iptables and conntrack,
# buildah and debootstrap. Run by `python -m dvstack up` with DV_NODE=1 when one is missing.
set -euo pipefail
PACKAGES=(containerd runc containernetworking-plugins iptables conntrack iproute2 buildah
          debootstrap debian-archive-keyring)
if [[ "$(id -u)" != 0 ]]; then
  echo "install-node-packages: run as root, or install: ${PACKAGES[*]}" >&2; exit 1
fi
command -v apt-get >/dev/null || {
  echo "install-node-packages: no apt-get here; install: ${PACKAGES[*]}" >&2; exit 1; }
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
echo "installing Debian packages for the node: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
