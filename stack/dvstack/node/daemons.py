"""A real node on the local stack: containerd, runc, the CNI bridge, kubelet,
kube-proxy, kube-scheduler and CoreDNS, started and stopped like the other daemons.

Everything it adds to the host is the stack's own and goes again at `down`: the
bridge (and the node address on it), containerd's root and state, pod network
namespaces and mounts, the cgroup root, kube-proxy's iptables chains, and the
sysctls kubelet or the CNI bridge changed (read before `up`, written back after);
`dvstack.node.host` does that part, and keeps the machine's one node claimed.
`python -m dvstack.node check` compares the host with the snapshot `up` took.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from dvstack import processes
from dvstack.images import oci_archive
from dvstack.node import config as node_config
from dvstack.node import host as node_host
from dvstack.node.config import NodeLayout
from dvstack.node.support import cni_bin_dir, unsupported_reason
from dvstack.services import kube_api
from dvstack.settings import KUBE_VERSION, NODE_ADDRESS, Settings, load
from dvstack.testing.waiting import http_ok, wait_for

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


# ---------------------------------------------------------------- certificates


def ensure_certs(settings: Settings) -> None:
    """The node's identities, signed by the stack's CA: kubelet's client (system:node),
    kubelet's serving certificate (the node address), and the API server's client
    certificate for kubelet (logs, exec)."""
    kube_api.ensure_pki(settings)
    kube_api.issue_cert(settings, "kubelet-client",
                        f"/O=system:nodes/CN=system:node:{node_config.NODE_NAME}", client=True)
    kube_api.issue_cert(settings, "kubelet-serving", f"/CN={node_config.NODE_NAME}",
                        client=False, sans=f"IP:{NODE_ADDRESS},"
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
    node = _layout(settings)
    if tag in _ctr(node, "images", "ls", "--quiet").split():
        return False
    repository = tag.rsplit(":", 1)[0]
    _ctr(node, "images", "import", "--base-name", repository, "--digests=false", str(archive))
    if tag not in _ctr(node, "images", "ls", "--quiet").split():
        raise SystemExit(f"importing {archive.name} into the node's containerd did not give "
                         f"{tag}: see `ctr -n k8s.io images ls`")
    return True


def _layout(settings: Settings) -> NodeLayout:
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
    node = _layout(settings)
    node.root.mkdir(parents=True, exist_ok=True)
    claim = node_host.read_claim()
    alive = claim is not None and node_host.daemon_alive(node_host.cmdlines(), claim.root)
    found = node_host.verdict(claim, settings.state_dir, alive=alive)
    if found == "busy":
        assert claim is not None
        raise SystemExit(f"the real node of the stack in {claim.state_dir} runs on this "
                         "machine, and a machine runs one node: stop that stack first "
                         "(`make stack-down` there), or run this one with DV_NODE=0")
    if found == "stale":
        assert claim is not None
        print(f"dvstack: the node of the stack in {claim.state_dir} was not stopped and its "
              "daemons are gone; taking back what it left on the host", flush=True)
        # A session killed mid-build leaves debootstrap's /proc mounted in the image cache;
        # with no daemon left, no build of this stack runs, so those mounts go too.
        left = _give_back(settings, Path(claim.root), Path(claim.run), claim.before,
                          also=[settings.cache_dir / "images" / "work"])
        if left:
            raise SystemExit("what that node left could not all be taken back:\n  "
                             + "\n  ".join(left) + "\n(its claim stays in "
                             f"{node_host.claim_path()}; see docs/real-node.md)")
    if found != "ours":
        node_host.write_claim(node_host.Claim(
            state_dir=str(settings.state_dir), root=str(node.root), run=str(node.run),
            before=node_host.host_state()))
    node_host.network_up()


def start_node(settings: Settings) -> None:
    """Start the node's daemons (reusing those that run) and wait for the node to be Ready."""
    node = _layout(settings)
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

    node_host.make_cgroup_root()
    kubelet_yaml = _write(node.root / "kubelet.yaml", yaml.safe_dump(node_config.kubelet_config(node)))
    if not processes.running(settings, KUBELET):
        processes.start(settings, KUBELET, [
            str(bin_dir / "kubelet"), f"--config={kubelet_yaml}",
            f"--kubeconfig={_kubelet_kubeconfig(settings)}",
            f"--hostname-override={node_config.NODE_NAME}",
            f"--node-ip={NODE_ADDRESS}",
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


def stop_node(settings: Settings) -> list[str]:
    """Stop the node and take back from the host all it added; the changes that remain."""
    node = _layout(settings)
    claim = node_host.read_claim()
    ours = claim if claim is not None and claim.held_by(settings.state_dir) else None
    if ours is None and not any(processes.running(settings, d) for d in DAEMONS):
        # This state directory runs no node; the bridge, if any, is another's.
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
    processes.stop(settings, CONTAINERD)
    changes = _give_back(settings, node.root, node.run, None if ours is None else ours.before)
    if ours is not None and not changes:
        node_host.release_claim()
    return changes


def _give_back(settings: Settings, root: Path, run: Path,
               before: dict[str, Any] | None, also: list[Path] | None = None) -> list[str]:
    """kube-proxy's own cleanup of its chains, then the rest of what the node added."""
    proxy_bin = settings.cache_dir / f"node-{KUBE_VERSION}" / "bin" / "kube-proxy"
    if proxy_bin.exists():
        subprocess.run([str(proxy_bin), "--cleanup"], capture_output=True, check=False)
    return node_host.give_back(root, run, before, also or [])


# ---------------------------------------------------------------- CLI


def run_node(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="dvstack.node.daemons", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("up", "down", "check", "build"))
    args = parser.parse_args(argv)
    settings = load()
    if args.command == "build":
        print(binaries(settings))
    elif args.command == "up":
        t0 = time.monotonic()
        start_node(settings)
        print(f"node {node_config.NODE_NAME} is Ready ({time.monotonic() - t0:.1f}s)")
    elif args.command == "down":
        changes = stop_node(settings)
        for line in changes:
            print(line)
        print("node is down" + (f"; {len(changes)} host changes remain" if changes else
                                "; the host is as it was"))
        sys.exit(1 if changes else 0)
    elif args.command == "check":
        claim = node_host.read_claim()
        if claim is None or not claim.held_by(settings.state_dir):
            print("no snapshot: no node of this state directory runs on this machine")
            return
        changes = node_host.host_changes(claim.before, node_host.host_state())
        print("\n".join(changes) or "the host is as it was before the node started")


if __name__ == "__main__":
    run_node()
