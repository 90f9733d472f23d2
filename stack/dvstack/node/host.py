"""What the real node adds to the host, and how it is given back.

A machine runs one node. `up` leaves a claim in /run (a tmpfs: it goes at boot with the
bridge and the rules it stands for) naming the stack whose node it is and the host as it
was before. Another checkout's stack so never shares a live node, and never takes the
leftovers of one that was killed (`kill -9`, a CI job cancelled) for the host as it was:
it refuses the first and takes the second back before it notes the host.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from dvstack import processes
from dvstack.node import config as node_config
from dvstack.settings import NODE_ADDRESS

CLAIM_ENV = "DV_NODE_CLAIM"
DEFAULT_CLAIM = "/run/dvnode.json"


# ---------------------------------------------------------------- the host as it is


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _sysctls() -> dict[str, str]:
    return {name: _read(Path("/proc/sys") / name) for name in node_config.SYSCTLS}


def _mounts() -> list[str]:
    return sorted({line.split()[1] for line in _read(Path("/proc/mounts")).splitlines()})


def _cgroups() -> list[str]:
    root = Path("/sys/fs/cgroup")
    found = []
    for controller in sorted(root.iterdir()):
        if controller.is_dir():
            found += [str(p.relative_to(root)) for p in controller.iterdir() if p.is_dir()]
    return sorted(found)


def _iptables() -> list[str]:
    """Every rule and chain of the tables kube-proxy writes, without packet counters."""
    out = []
    for table in ("filter", "nat", "mangle"):
        proc = subprocess.run(["iptables-save", "-t", table], capture_output=True, text=True,
                              check=False)
        out += [f"{table} {line.split(' [')[0]}" for line in proc.stdout.splitlines()
                if line and not line.startswith(("#", "*", "COMMIT"))]
    return out


def _links() -> list[str]:
    proc = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                          check=False)
    return sorted(line.split(":")[1].strip().split("@")[0] for line in proc.stdout.splitlines())


def _netns() -> list[str]:
    d = Path("/var/run/netns")
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def host_state() -> dict[str, Any]:
    """What `down` must leave as it found: mounts, cgroups, iptables, links, sysctls."""
    return {"mounts": _mounts(), "cgroups": _cgroups(), "iptables": _iptables(),
            "links": _links(), "netns": _netns(), "sysctls": _sysctls(),
            "run_containerd": Path("/run/containerd").exists()}


def host_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Each difference between two snapshots, as a line a person can act on."""
    changes = []
    for key in ("mounts", "cgroups", "iptables", "links", "netns"):
        added = sorted(set(after[key]) - set(before[key]))
        removed = sorted(set(before[key]) - set(after[key]))
        changes += [f"{key}: left behind {item}" for item in added]
        changes += [f"{key}: missing {item}" for item in removed]
    for name, value in before["sysctls"].items():
        if after["sysctls"].get(name) != value:
            changes.append(f"sysctl {name} is {after['sysctls'].get(name)!r}, was {value!r}")
    if after["run_containerd"] and not before["run_containerd"]:
        changes.append("left behind /run/containerd")
    return changes


# ---------------------------------------------------------------- the claim


@dataclass(frozen=True)
class Claim:
    """Whose node runs on this machine, where it keeps its state, and the host before it."""

    state_dir: str  # the stack's state directory
    root: str  # the node's own state under it: containerd's root, kubelet's
    run: str  # the node's run directory: containerd's state and sockets
    before: dict[str, Any]

    def held_by(self, state_dir: Path) -> bool:
        return self.state_dir == str(state_dir)


Verdict = Literal["free", "ours", "busy", "stale"]


def claim_path() -> Path:
    return Path(os.environ.get(CLAIM_ENV, DEFAULT_CLAIM))


def read_claim() -> Claim | None:
    path = claim_path()
    try:
        raw = json.loads(path.read_text())
        return Claim(state_dir=str(raw["state_dir"]), root=str(raw["root"]),
                     run=str(raw["run"]), before=dict(raw["before"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"{path} is not a node claim this stack wrote ({exc}): if no node "
                         "runs on this machine, remove it") from None


def write_claim(claim: Claim) -> None:
    path = claim_path()
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(asdict(claim), indent=1))
    partial.replace(path)


def release_claim() -> None:
    claim_path().unlink(missing_ok=True)


def verdict(claim: Claim | None, state_dir: Path, *, alive: bool) -> Verdict:
    """What a stack starting a node from `state_dir` does with the claim it found: take
    the host (free), keep its own snapshot (ours), refuse (busy), or first take back what
    a node whose daemons are gone left behind (stale)."""
    if claim is None:
        return "free"
    if claim.held_by(state_dir):
        return "ours"
    return "busy" if alive else "stale"


def daemon_alive(cmdlines: dict[int, str], root: str) -> bool:
    """Whether a daemon of the node keeping its state in `root` runs: each is started with
    a file under it (containerd's and kube-proxy's configuration, kubelet's root, the
    Corefile). Shims are no daemons: they outlive a killed containerd by design."""
    marker = root.rstrip("/") + "/"
    return any(marker in line and "containerd-shim" not in line
               for line in cmdlines.values())


def cmdlines() -> dict[int, str]:
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            found[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, UnicodeDecodeError):
            continue
    return found


# ---------------------------------------------------------------- network


def _subnet_taken() -> str | None:
    ours = ipaddress.ip_network(node_config.SUBNET)
    proc = subprocess.run(["ip", "-o", "-4", "route", "show"], capture_output=True, text=True,
                          check=False)
    for line in proc.stdout.splitlines():
        dst = line.split()[0]
        if dst == "default" or f"dev {node_config.BRIDGE}" in line:
            continue
        try:
            if ipaddress.ip_network(dst, strict=False).overlaps(ours):
                return line
        except ValueError:
            continue
    return None


def _ip(*args: str) -> None:
    processes.run(["ip", *args], what=f"ip {' '.join(args)}")


def network_up() -> None:
    """The stack's bridge, holding the node address every pod routes through."""
    taken = _subnet_taken()
    if taken:
        raise SystemExit(f"the node's range {node_config.SUBNET} is already routed on this "
                         f"host ({taken}); the node cannot take it")
    if node_config.BRIDGE not in _links():
        _ip("link", "add", node_config.BRIDGE, "type", "bridge")
    proc = subprocess.run(["ip", "-o", "-4", "addr", "show", "dev", node_config.BRIDGE],
                          capture_output=True, text=True, check=False)
    if f"{NODE_ADDRESS}/" not in proc.stdout:
        prefix = ipaddress.ip_network(node_config.SUBNET).prefixlen
        _ip("addr", "add", f"{NODE_ADDRESS}/{prefix}", "dev", node_config.BRIDGE)
    _ip("link", "set", node_config.BRIDGE, "up")


def network_down() -> None:
    if node_config.BRIDGE in _links():
        _ip("link", "del", node_config.BRIDGE)


# ---------------------------------------------------------------- giving back


def give_back(root: Path, run: Path, before: dict[str, Any] | None,
              also: Sequence[Path] = ()) -> list[str]:
    """After the node's daemons stopped, or died: take back what the node added, and the
    mounts under `also` (what a killed image build left), then the differences from
    `before` that remain (none without a snapshot to compare with)."""
    containerd_state = node_config.containerd_state_of(run)
    for pid, line in cmdlines().items():
        if "containerd-shim" in line and str(containerd_state) in line:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    _kill_cgroup_tasks()
    _unmount_under([root, containerd_state, Path("/run/containerd"), *also])
    if before is not None:
        _remove_netns(before["netns"])
    _remove_cgroups()
    network_down()
    if before is not None:
        _remove_iptables(before["iptables"])
        _restore_sysctls(before["sysctls"])
        if not before["run_containerd"]:
            shutil.rmtree("/run/containerd", ignore_errors=True)
    shutil.rmtree(run, ignore_errors=True)
    return [] if before is None else host_changes(before, host_state())


def _node_cgroups() -> list[Path]:
    """The node's cgroup root in each hierarchy that has it."""
    name = node_config.CGROUP_ROOT.strip("/")
    return [c / name for c in Path("/sys/fs/cgroup").iterdir() if (c / name).is_dir()]


def _kill_cgroup_tasks() -> None:
    """The pods' processes, when their shims died before their sandboxes were removed."""
    for top in _node_cgroups():
        for procs in top.rglob("cgroup.procs"):
            for pid in _read(procs).split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)


def _unmount_under(roots: list[Path]) -> None:
    prefixes = [str(r.resolve()) + "/" for r in roots] + [str(r.resolve()) for r in roots]
    for _ in range(3):
        mounts = [m for m in _mounts() if any(m.startswith(p) for p in prefixes)]
        if not mounts:
            return
        for mount in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True, check=False)


def _remove_netns(before: list[str]) -> None:
    d = Path("/var/run/netns")
    for name in set(_netns()) - set(before):
        if name.startswith("cni-"):
            subprocess.run(["umount", "-l", str(d / name)], capture_output=True, check=False)
            (d / name).unlink(missing_ok=True)


def make_cgroup_root() -> None:
    """kubelet wants its cgroup root to exist in every hierarchy; a new cpuset must be
    given its parent's CPUs and memory nodes before a task may join it; the cpu weight
    makes the node count as a machine beside the host's threads (`cpu_shares`)."""
    name = node_config.CGROUP_ROOT.strip("/")
    for controller in Path("/sys/fs/cgroup").iterdir():
        if not controller.is_dir() or controller.is_symlink() or controller.name == "unified":
            continue
        top = controller / name
        top.mkdir(exist_ok=True)
        for knob in ("cpuset.cpus", "cpuset.mems"):
            if (top / knob).is_file() and not _read(top / knob):
                (top / knob).write_text(_read(controller / knob))
        if (top / "cpu.shares").is_file():
            (top / "cpu.shares").write_text(str(node_config.cpu_shares(os.cpu_count() or 1)))


def _remove_cgroups() -> None:
    for top in _node_cgroups():
        for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                d.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()


def _remove_iptables(before: list[str]) -> None:
    """The rules and chains that appeared since the snapshot (kubelet's KUBE-FIREWALL and
    canaries; kube-proxy's are gone already with --cleanup): rules first, then chains."""
    added = [line for line in _iptables() if line not in set(before)]
    for line in added:
        table, rule = line.split(" ", 1)
        if rule.startswith("-A "):
            subprocess.run(["iptables", "-t", table, "-D", *shlex.split(rule[3:])],
                           capture_output=True, check=False)
    for line in added:
        table, rule = line.split(" ", 1)
        if rule.startswith(":"):
            chain = rule[1:].split()[0]
            subprocess.run(["iptables", "-t", table, "-F", chain], capture_output=True,
                           check=False)
            subprocess.run(["iptables", "-t", table, "-X", chain], capture_output=True,
                           check=False)


def _restore_sysctls(values: dict[str, str]) -> None:
    for name, value in values.items():
        path = Path("/proc/sys") / name
        if value and _read(path) != value:
            with contextlib.suppress(OSError):
                path.write_text(value)
