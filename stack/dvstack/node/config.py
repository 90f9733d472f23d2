"""The local node's configuration files, as pure functions of its layout.

The node is containerd + runc + the CNI bridge, kubelet, kube-proxy,
kube-scheduler and CoreDNS, all host processes. Everything it creates on the host
lives under names and paths the stack owns: its own bridge and address range, its
own containerd root and state, its own cgroup root and iptables chains, so that
`down` can remove all of it and leave the host as it was.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from dvstack.settings import NODE_ADDRESS, Settings, env_port

NODE_NAME = "dv-node"
BRIDGE = "dvnode0"
# A private range no host route uses here; `up` checks it is free before taking it.
SUBNET = "10.217.0.0/16"
POD_RANGE = ("10.217.1.2", "10.217.1.254")
SERVICE_RANGE = "10.0.0.0/24"
CLUSTER_DOMAIN = "cluster.local"
CGROUP_ROOT = "/dvnode"
HOST_THREADS_PER_CORE = 4
"""How many of the host's busy threads the node's cgroup weighs as, per core (see
`cpu_shares`)."""
PAUSE_IMAGE = "localhost/dv-pause:1"
# Images of the stack's own making; kubelet must never pull them (there is no registry).
# What kubelet (and the CNI bridge with isGateway) may change on the host: read before
# the node starts, written back after it stops.
SYSCTLS = (
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/route_localnet",
    "net/bridge/bridge-nf-call-iptables",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "vm/overcommit_memory",
    "vm/panic_on_oom",
)


@dataclass(frozen=True)
class NodeLayout:
    """Where the node keeps its state and which ports it listens on."""

    root: Path
    run: Path
    kube_dir: Path
    kubelet_port: int
    kubelet_healthz_port: int
    scheduler_port: int
    proxy_healthz_port: int
    proxy_metrics_port: int
    coredns_health_port: int

    @property
    def containerd_root(self) -> Path:
        return self.root / "containerd" / "root"

    @property
    def containerd_state(self) -> Path:
        return containerd_state_of(self.run)

    @property
    def containerd_socket(self) -> Path:
        return self.run / "containerd.sock"

    @property
    def cni_conf_dir(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def ipam_dir(self) -> Path:
        return self.root / "cni" / "ipam"

    @property
    def kubelet_root(self) -> Path:
        return self.root / "kubelet"

    @property
    def resolv_conf(self) -> Path:
        return self.root / "resolv.conf"


def containerd_state_of(run: Path) -> Path:
    """containerd's state under a node's run directory (its shims name it), also for a
    node known only by its claim."""
    return run / "containerd"


def layout(settings: Settings) -> NodeLayout:
    return NodeLayout(
        root=settings.state_dir / "node",
        # containerd's shim sockets must fit a unix socket path (108 bytes).
        run=Path(os.environ.get("DV_NODE_RUN_DIR", f"/run/dvnode-{_short_id(settings)}")),
        kube_dir=settings.state_dir / "kube",
        kubelet_port=env_port("DV_KUBELET_PORT", 20250),
        kubelet_healthz_port=env_port("DV_KUBELET_HEALTHZ_PORT", 20248),
        scheduler_port=env_port("DV_SCHEDULER_PORT", 20259),
        proxy_healthz_port=env_port("DV_PROXY_HEALTHZ_PORT", 20256),
        proxy_metrics_port=env_port("DV_PROXY_METRICS_PORT", 20249),
        coredns_health_port=env_port("DV_COREDNS_HEALTH_PORT", 20280),
    )


def _short_id(settings: Settings) -> str:
    import hashlib

    return hashlib.sha256(str(settings.state_dir).encode()).hexdigest()[:8]


def containerd_config(node: NodeLayout, cni_bin_dir: str) -> str:
    """containerd 1.6's config (version 2). `restrict_oom_score_adj`: root here may not
    lower a process's OOM score (no CAP_SYS_RESOURCE), so the CRI must not try."""
    def q(value: object) -> str:
        return json.dumps(str(value))

    return "\n".join([
        "version = 2",
        f"root = {q(node.containerd_root)}",
        f"state = {q(node.containerd_state)}",
        'disabled_plugins = ["io.containerd.snapshotter.v1.aufs", '
        '"io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", '
        '"io.containerd.snapshotter.v1.devmapper", "io.containerd.grpc.v1.cri.tracing"]',
        "",
        "[grpc]",
        f"  address = {q(node.containerd_socket)}",
        "[ttrpc]",
        f"  address = {q(node.run / 'containerd.sock.ttrpc')}",
        "",
        '[plugins."io.containerd.internal.v1.opt"]',
        f"  path = {q(node.root / 'containerd' / 'opt')}",
        "",
        '[plugins."io.containerd.grpc.v1.cri"]',
        f"  sandbox_image = {q(PAUSE_IMAGE)}",
        "  restrict_oom_score_adj = true",
        "  disable_apparmor = true",
        '  stream_server_address = "127.0.0.1"',
        '  stream_server_port = "0"',
        "  enable_selinux = false",
        '  [plugins."io.containerd.grpc.v1.cri".containerd]',
        '    snapshotter = "overlayfs"',
        '    default_runtime_name = "runc"',
        '    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]',
        '      runtime_type = "io.containerd.runc.v2"',
        '      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]',
        "        SystemdCgroup = false",
        '  [plugins."io.containerd.grpc.v1.cri".cni]',
        f"    bin_dir = {q(cni_bin_dir)}",
        f"    conf_dir = {q(node.cni_conf_dir)}",
        "    max_conf_num = 1",
        "",
    ])


def cni_config(node: NodeLayout) -> dict[str, object]:
    """One bridge, the stack's own, with the node address as every pod's gateway. No
    masquerade and no port mapping: pods talk to the stack's own services only, and
    neither adds iptables chains of the CNI's own."""
    return {
        "cniVersion": "1.0.0",
        "name": "dvnode",
        "plugins": [{
            "type": "bridge",
            "bridge": BRIDGE,
            "isGateway": True,
            "ipMasq": False,
            "hairpinMode": True,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": SUBNET, "rangeStart": POD_RANGE[0],
                             "rangeEnd": POD_RANGE[1], "gateway": NODE_ADDRESS}]],
                "routes": [{"dst": "0.0.0.0/0"}],
                "dataDir": str(node.ipam_dir),
            },
        }],
    }


def kubelet_config(node: NodeLayout) -> dict[str, object]:
    """KubeletConfiguration for one node under the stack's own cgroup root."""
    kube = node.kube_dir
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": NODE_ADDRESS,
        "port": node.kubelet_port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": node.kubelet_healthz_port,
        "tlsCertFile": str(kube / "kubelet-serving.crt"),
        "tlsPrivateKeyFile": str(kube / "kubelet-serving.key"),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(kube / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{node.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": CGROUP_ROOT,
        "cgroupsPerQOS": True,
        # This machine's cgroups are v1; kubelet 1.34 still runs on them when told to.
        "failCgroupV1": False,
        "failSwapOn": False,
        "clusterDNS": [NODE_ADDRESS],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(node.resolv_conf),
        "staticPodPath": "",
        "serializeImagePulls": False,
        # The images are the stack's own imports: nothing may collect them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                         "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
        "protectKernelDefaults": False,
        "kernelMemcgNotification": False,
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "enforceNodeAllocatable": ["pods"],
        "maxPods": 110,
        "shutdownGracePeriod": "0s",
    }


def kube_proxy_config(node: NodeLayout, kubeconfig: Path) -> dict[str, object]:
    """Services in iptables mode, for the pod range only. It leaves conntrack's host-wide
    settings alone (zeros mean "do not set") and does not open NodePorts on 127.0.0.1,
    which would have needed route_localnet on every interface."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": NODE_NAME,
        "bindAddress": NODE_ADDRESS,
        "healthzBindAddress": f"127.0.0.1:{node.proxy_healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{node.proxy_metrics_port}",
        "mode": "iptables",
        "clusterCIDR": SUBNET,
        "nodePortAddresses": [f"{NODE_ADDRESS}/32"],
        "iptables": {"localhostNodePorts": False},
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                      "tcpCloseWaitTimeout": "0s", "udpTimeout": "0s",
                      "udpStreamTimeout": "0s"},
    }


def corefile(node: NodeLayout, kubeconfig: Path) -> str:
    """CoreDNS on the node address: the cluster's names from the API server, nothing
    else (the machine has no upstream resolver a pod may use)."""
    return "\n".join([
        f"{CLUSTER_DOMAIN}:53 in-addr.arpa:53 {{",
        f"    bind {NODE_ADDRESS}",
        "    errors",
        f"    health 127.0.0.1:{node.coredns_health_port}",
        f"    kubernetes {CLUSTER_DOMAIN} in-addr.arpa {{",
        f"        kubeconfig {kubeconfig} dv-local",
        "        pods insecure",
        "    }",
        "    cache 5",
        "}",
        ".:53 {",
        f"    bind {NODE_ADDRESS}",
        "    errors",
        "    template ANY ANY {",
        "        rcode NXDOMAIN",
        "    }",
        "}",
        "",
    ])


def resolv_conf() -> str:
    """The base of every pod's resolv.conf: only the node's own DNS, none of the host's."""
    return f"nameserver {NODE_ADDRESS}\noptions ndots:5\n"


def cpu_shares(cores: int) -> int:
    """The node's cgroup weight (cgroup v1 `cpu.shares`) beside the host's processes.

    The host's tasks sit in the root cgroup, where each runnable thread weighs 1024 and the
    whole node one group of 1024: under a full suite (Kafka, the API server, three stand-in
    Spark jobs) the node got a tenth of the machine and a migration on it crawled (42,487
    records in 858 s). Standing for a machine of its own, it weighs as `HOST_THREADS_PER_CORE`
    busy host threads per core instead: about half the machine under that load, all of it
    when the host is idle. Capped at the kernel's maximum."""
    return min(262144, 1024 * HOST_THREADS_PER_CORE * max(1, cores))
