"""A real node on the local stack: containerd, runc, the CNI bridge, kubelet,
kube-proxy, kube-scheduler and CoreDNS, started and stopped like the other daemons.

Everything it adds to the host is the stack's own and goes again at `down`: the
bridge (and the node address on it), containerd's root and state, pod network
namespaces and mounts, the cgroup root, kube-proxy's iptables chains, and the
sysctls kubelet or the CNI bridge changed (read before `up`, written back after).
`host_changes` compares the host with the snapshot `up` took, for tests and
`python -m dvstack node check`.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from dvstack import kube_api, node_config, oci_archive, processes
from dvstack.node_config import NodeLayout
from dvstack.node_support import cni_bin_dir, unsupported_reason
from dvstack.settings import KUBE_VERSION, Settings, load
from dvstack.waiting import http_ok, wait_for

CONTAINERD = "containerd"
KUBELET = "kubelet"
KUBE_PROXY = "kube-proxy"
SCHEDULER = "kube-scheduler"
COREDNS = "coredns"
# Started in this order, stopped in the reverse.
DAEMONS = (CONTAINERD, KUBELET, SCHEDULER, KUBE_PROXY, COREDNS)


def binaries(settings: Settings) -> Path:
    """The node's own builds (kubelet, kube-proxy, kube-scheduler, CoreDNS, crictl, pause)."""
    script = settings.repo / "stack" / "build-node.sh"
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False,
                          env={**os.environ, "DV_CACHE_DIR": str(settings.cache_dir)})
    if proc.returncode != 0:
        raise SystemExit(f"building the node's binaries failed:\n{proc.stderr[-3000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- host snapshot


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


def _snapshot_file(node: NodeLayout) -> Path:
    return node.root / "host-before.json"


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
    if f"{node_config.NODE_ADDRESS}/" not in proc.stdout:
        prefix = ipaddress.ip_network(node_config.SUBNET).prefixlen
        _ip("addr", "add", f"{node_config.NODE_ADDRESS}/{prefix}", "dev", node_config.BRIDGE)
    _ip("link", "set", node_config.BRIDGE, "up")


def network_down() -> None:
    if node_config.BRIDGE in _links():
        _ip("link", "del", node_config.BRIDGE)


# ---------------------------------------------------------------- certificates


def ensure_certs(settings: Settings) -> None:
    """The node's identities, signed by the stack's CA: kubelet's client (system:node),
    kubelet's serving certificate (the node address), and the API server's client
    certificate for kubelet (logs, exec)."""
    kube_api.ensure_pki(settings)
    kube_api.issue_cert(settings, "kubelet-client",
                        f"/O=system:nodes/CN=system:node:{node_config.NODE_NAME}", client=True)
    kube_api.issue_cert(settings, "kubelet-serving", f"/CN={node_config.NODE_NAME}",
                        client=False, sans=f"IP:{node_config.NODE_ADDRESS},"
                                           f"DNS:{node_config.NODE_NAME}")


def _kubelet_kubeconfig(settings: Settings) -> Path:
    d = kube_api.kube_dir(settings)
    path = d / "kubelet.kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "dv-local", "cluster": {
            "server": kube_api.server_url(settings), "certificate-authority": str(d / "ca.crt")}}],
        "users": [{"name": "kubelet", "user": {
            "client-certificate": str(d / "kubelet-client.crt"),
            "client-key": str(d / "kubelet-client.key")}}],
        "contexts": [{"name": "dv-local", "context": {"cluster": "dv-local", "user": "kubelet"}}],
        "current-context": "dv-local",
    }, indent=2))
    path.chmod(0o600)
    return path


# ---------------------------------------------------------------- start


def _write(path: Path, text: str) -> Path:
    """Write only a changed file: kube-proxy exits when its configuration is written to."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path


def _ctr(node: NodeLayout, *args: str) -> str:
    return processes.run(["ctr", "--address", str(node.containerd_socket), "--namespace",
                          "k8s.io", *args], what=f"ctr {' '.join(args[:2])}")


def import_image(settings: Settings, tag: str, archive: Path) -> bool:
    """Load an OCI archive into the node's containerd, where kubelet finds it, unless an
    image of that tag is there already (tags are content hashes); True when imported."""
    node = layout(settings)
    if tag in _ctr(node, "images", "ls", "--quiet").split():
        return False
    repository = tag.rsplit(":", 1)[0]
    _ctr(node, "images", "import", "--base-name", repository, "--digests=false", str(archive))
    if tag not in _ctr(node, "images", "ls", "--quiet").split():
        raise SystemExit(f"importing {archive.name} into the node's containerd did not give "
                         f"{tag}: see `ctr -n k8s.io images ls`")
    return True


def layout(settings: Settings) -> NodeLayout:
    return node_config.layout(settings)


def _pause_archive(settings: Settings, bin_dir: Path) -> Path:
    pause = (bin_dir / "pause").resolve()
    archive = settings.cache_dir / "node-images" / f"{pause.name}.oci.tar"
    if not archive.is_file():
        archive.parent.mkdir(parents=True, exist_ok=True)
        data = oci_archive.image_archive(
            node_config.PAUSE_IMAGE, [oci_archive.File("/pause", pause.read_bytes())],
            entrypoint=["/pause"], user="65535:65535")
        partial = archive.with_suffix(".partial")
        partial.write_bytes(data)
        partial.replace(archive)
    return archive


def _node_ready(settings: Settings) -> bool:
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(config_file=str(settings.kubeconfig)))
    try:
        node = api.read_node(node_config.NODE_NAME)
    except client.exceptions.ApiException:
        return False
    return any(c.type == "Ready" and c.status == "True"
               for c in (node.status.conditions or []))


def prepare_host(settings: Settings) -> None:
    """Before any service binds the node address: note the host as it is, then add the
    bridge. Refuses a machine that cannot run the node, saying why."""
    reason = unsupported_reason()
    if reason and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["bash", str(settings.repo / "stack" / "install-node-packages.sh")],
                       check=False)
        reason = unsupported_reason()
    if reason:
        raise SystemExit(f"this machine cannot run the real node: {reason}. "
                         "DV_NODE=0 runs the stack with the SparkApplication stand-in only.")
    node = layout(settings)
    node.root.mkdir(parents=True, exist_ok=True)
    if not _snapshot_file(node).is_file():
        _snapshot_file(node).write_text(json.dumps(host_state(), indent=1))
    network_up()


def start(settings: Settings) -> None:
    """Start the node's daemons (reusing those that run) and wait for the node to be Ready."""
    node = layout(settings)
    bin_dir = binaries(settings)
    cni_bin = cni_bin_dir()
    assert cni_bin is not None
    prepare_host(settings)
    ensure_certs(settings)
    kubeconfig = settings.kubeconfig
    for d in (node.containerd_state, node.ipam_dir):
        d.mkdir(parents=True, exist_ok=True)
    _write(node.cni_conf_dir / "10-dvnode.conflist",
           json.dumps(node_config.cni_config(node), indent=2))
    _write(node.resolv_conf, node_config.resolv_conf())
    containerd_toml = _write(node.root / "containerd.toml",
                             node_config.containerd_config(node, cni_bin))
    if not processes.running(settings, CONTAINERD):
        processes.start(settings, CONTAINERD, ["containerd", "--config", str(containerd_toml)])
    wait_for(lambda: node.containerd_socket.exists() and _ctr_ok(node), timeout=60,
             what="containerd to serve its socket",
             on_timeout=lambda: processes.tail(processes.log_file(settings, CONTAINERD)))
    _ctr(node, "images", "import", str(_pause_archive(settings, bin_dir)))

    _make_cgroup_root()
    kubelet_yaml = _write(node.root / "kubelet.yaml", yaml.safe_dump(node_config.kubelet_config(node)))
    if not processes.running(settings, KUBELET):
        processes.start(settings, KUBELET, [
            str(bin_dir / "kubelet"), f"--config={kubelet_yaml}",
            f"--kubeconfig={_kubelet_kubeconfig(settings)}",
            f"--hostname-override={node_config.NODE_NAME}",
            f"--node-ip={node_config.NODE_ADDRESS}",
            f"--root-dir={node.kubelet_root}",
            f"--cert-dir={node.root / 'kubelet-pki'}",
            "--v=1",
        ])
    if not processes.running(settings, SCHEDULER):
        processes.start(settings, SCHEDULER, [
            str(bin_dir / "kube-scheduler"), f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={node.scheduler_port}",
            "--leader-elect=false", "--v=1",
        ])
    proxy_yaml = _write(node.root / "kube-proxy.yaml",
                        yaml.safe_dump(node_config.kube_proxy_config(node, kubeconfig)))
    if not processes.running(settings, KUBE_PROXY):
        processes.start(settings, KUBE_PROXY, [str(bin_dir / "kube-proxy"),
                                               f"--config={proxy_yaml}", "--v=1"])
    core = _write(node.root / "Corefile", node_config.corefile(node, kubeconfig))
    if not processes.running(settings, COREDNS):
        processes.start(settings, COREDNS, [str(bin_dir / "coredns"), "-conf", str(core)])
    wait_for(lambda: _node_ready(settings), timeout=120,
             what=f"node {node_config.NODE_NAME} to be Ready",
             on_timeout=lambda: processes.tail(processes.log_file(settings, KUBELET)))
    wait_for(lambda: http_ok(f"http://127.0.0.1:{node.proxy_healthz_port}/healthz"),
             timeout=60, what="kube-proxy to sync",
             on_timeout=lambda: processes.tail(processes.log_file(settings, KUBE_PROXY)))
    wait_for(lambda: http_ok(f"http://127.0.0.1:{node.coredns_health_port}/health"),
             timeout=60, what="CoreDNS to serve",
             on_timeout=lambda: processes.tail(processes.log_file(settings, COREDNS)))


def _ctr_ok(node: NodeLayout) -> bool:
    proc = subprocess.run(["ctr", "--address", str(node.containerd_socket), "version"],
                          capture_output=True, check=False)
    return proc.returncode == 0


# ---------------------------------------------------------------- stop


def stop(settings: Settings) -> list[str]:
    """Stop the node and take back from the host all it added; the changes that remain."""
    node = layout(settings)
    before_file = _snapshot_file(node)
    if not before_file.is_file() and not any(processes.running(settings, d) for d in DAEMONS):
        # This state directory never started a node; the bridge, if any, is another's.
        return []
    processes.stop(settings, KUBELET)
    if processes.running(settings, CONTAINERD):
        crictl = settings.cache_dir / f"node-{KUBE_VERSION}" / "bin" / "crictl"
        if crictl.is_file():
            # Each sandbox stopped through the CRI: CNI DEL, network namespace unmounted.
            subprocess.run([str(crictl), "--runtime-endpoint",
                            f"unix://{node.containerd_socket}", "--timeout", "30s",
                            "rmp", "--all", "--force"], capture_output=True, check=False)
    for name in (COREDNS, KUBE_PROXY, SCHEDULER):
        processes.stop(settings, name)
    proxy_bin = settings.cache_dir / f"node-{KUBE_VERSION}" / "bin" / "kube-proxy"
    if proxy_bin.exists():
        subprocess.run([str(proxy_bin), "--cleanup"], capture_output=True, check=False)
    processes.stop(settings, CONTAINERD)
    _kill_shims(node)
    _unmount_under([node.root, node.containerd_state, Path("/run/containerd")])
    before = json.loads(before_file.read_text()) if before_file.is_file() else None
    if before is not None:
        _remove_netns(before["netns"])
    _remove_cgroups()
    network_down()
    if before is not None:
        _remove_iptables(before["iptables"])
        _restore_sysctls(before["sysctls"])
        if not before["run_containerd"]:
            shutil.rmtree("/run/containerd", ignore_errors=True)
    shutil.rmtree(node.run, ignore_errors=True)
    if before is None:
        return []
    changes = host_changes(before, host_state())
    if not changes:
        before_file.unlink()
    return changes


def _kill_shims(node: NodeLayout) -> None:
    """containerd's shims outlive it by design; the node's own go with it."""
    marker = str(node.containerd_state)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "containerd-shim" in cmdline and marker in cmdline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(proc.name), 9)


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


def _make_cgroup_root() -> None:
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
    name = node_config.CGROUP_ROOT.strip("/")
    for controller in Path("/sys/fs/cgroup").iterdir():
        top = controller / name
        if not top.is_dir():
            continue
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


# ---------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="dvstack.node", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("up", "down", "check", "build"))
    args = parser.parse_args(argv)
    settings = load()
    if args.command == "build":
        print(binaries(settings))
    elif args.command == "up":
        t0 = time.monotonic()
        start(settings)
        print(f"node {node_config.NODE_NAME} is Ready ({time.monotonic() - t0:.1f}s)")
    elif args.command == "down":
        changes = stop(settings)
        for line in changes:
            print(line)
        print("node is down" + (f"; {len(changes)} host changes remain" if changes else
                                "; the host is as it was"))
        sys.exit(1 if changes else 0)
    elif args.command == "check":
        before_file = _snapshot_file(layout(settings))
        if not before_file.is_file():
            print("no snapshot: the node was not started from this state directory")
            return
        changes = host_changes(json.loads(before_file.read_text()), host_state())
        print("\n".join(changes) or "the host is as it was before the node started")


if __name__ == "__main__":
    main()
