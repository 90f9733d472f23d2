"""Whether this machine can run the real node, decided before any setting is resolved.

Kept apart from `dvstack.node.daemons` because `dvstack.settings` asks it: with `DV_NODE` unset the
stack runs the node wherever it can, and the stand-in elsewhere, saying why.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

CNI_BIN_DIRS = ("/usr/lib/cni", "/opt/cni/bin")
"""Where Debian's containernetworking-plugins (first) or a manual install put the plugins."""
DEBIAN_PACKAGES = {
    "containerd": "containerd", "ctr": "containerd", "containerd-shim-runc-v2": "containerd",
    "runc": "runc", "iptables": "iptables", "ip": "iproute2", "mount": "mount",
}
"""Each command the node runs, and the Debian package that provides it."""
NAMESPACE_LABEL = "derivedviews.io/real-node"
"""A namespace labelled `true` has its SparkApplications run by the real Spark Operator on
the node; every other namespace's by the stand-in, which serves for speed beside it."""
NAMESPACE_SELECTOR = f"{NAMESPACE_LABEL}=true"
"""Those namespaces, as the label selector the controller and the stand-in are given."""


def cni_bin_dir() -> str | None:
    for d in CNI_BIN_DIRS:
        if (Path(d) / "bridge").is_file() and (Path(d) / "host-local").is_file():
            return d
    return None


def host_reason() -> str | None:
    """What the host itself lacks (no package install can give it), or None."""
    if os.geteuid() != 0:
        return "the node needs root (containerd, kubelet and the CNI bridge change the host)"
    if not Path("/sys/fs/cgroup").is_dir() or not os.listdir("/sys/fs/cgroup"):
        return "the node needs cgroups mounted under /sys/fs/cgroup"
    return None


def unsupported_reason() -> str | None:
    """Why this machine cannot run the node as it is now, or None."""
    reason = host_reason()
    if reason:
        return reason
    missing = [f"{cmd} (Debian package {pkg})" for cmd, pkg in DEBIAN_PACKAGES.items()
               if shutil.which(cmd) is None]
    if missing:
        return "the node needs " + ", ".join(missing)
    if cni_bin_dir() is None:
        return ("the node needs the CNI bridge and host-local plugins "
                "(Debian package containernetworking-plugins)")
    return None


def auto_reason() -> str | None:
    """Why `DV_NODE` unset means no node here, or None: packages `up` can install with
    apt-get (as root) are no reason."""
    reason = host_reason()
    if reason or shutil.which("apt-get"):
        return reason
    return unsupported_reason()
