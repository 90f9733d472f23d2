"""etcd + kube-apiserver + kube-controller-manager as local processes.

The envtest pattern, plus the controller manager so ownerReference garbage
collection and namespace deletion behave as on a cluster.  Authentication is
by static bearer tokens and authorisation is RBAC, so the chart's RBAC can be
tested against this API server for real.
"""

from __future__ import annotations

import json
import secrets
import ssl
import urllib.error
import urllib.request
from pathlib import Path

from dvstack import processes
from dvstack.artefacts import KubeBinaries
from dvstack.settings import NODE_ADDRESS, Settings
from dvstack.testing.waiting import wait_for

ADMIN_USER = "dv-admin"


def kube_dir(settings: Settings) -> Path:
    return settings.state_dir / "kube"


def _openssl(*args: str, cwd: Path) -> None:
    processes.run(["openssl", *args], what=f"openssl {args[0]}", cwd=cwd)


def ensure_pki(settings: Settings) -> None:
    """A CA, a serving certificate for the API server's addresses, a service-account key."""
    d = kube_dir(settings)
    d.mkdir(parents=True, exist_ok=True)
    if not (d / "ca.crt").is_file():
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
                 "ca.crt", "-days", "3650", "-subj", "/CN=derived-views-local-ca", cwd=d)
    if not (d / "sa.key").is_file():
        _openssl("genrsa", "-out", "sa.key", "2048", cwd=d)
        _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)
    # Loopback, the node address pods use, the `kubernetes` Service's ClusterIP and names.
    issue_cert(settings, "apiserver", "/CN=kube-apiserver", client=False, sans=(
        f"IP:127.0.0.1,IP:{NODE_ADDRESS},IP:10.0.0.1,DNS:localhost,DNS:kubernetes,"
        "DNS:kubernetes.default,DNS:kubernetes.default.svc,"
        "DNS:kubernetes.default.svc.cluster.local"))


def issue_cert(settings: Settings, name: str, subject: str, *, client: bool,
               sans: str | None = None) -> None:
    """`<name>.crt`/`.key` signed by the stack's CA, once: a client certificate (the
    subject's O is the group, CN the user) or a serving one for `sans`."""
    d = kube_dir(settings)
    ext = [f"extendedKeyUsage={'clientAuth' if client else 'serverAuth'}"]
    if sans:
        ext.append(f"subjectAltName={sans}")
    wanted = "\n".join(ext) + "\n"
    ext_file = d / f"{name}.ext"
    if (d / f"{name}.crt").is_file() and ext_file.is_file() and ext_file.read_text() == wanted:
        return
    ext_file.write_text(wanted)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
             f"{name}.csr", "-subj", subject, cwd=d)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{name}.crt", "-days", "3650", "-extfile",
             f"{name}.ext", cwd=d)


def admin_token(settings: Settings) -> str:
    """A static token in group system:masters, created once per state directory."""
    d = kube_dir(settings)
    d.mkdir(parents=True, exist_ok=True)
    tokens = d / "tokens.csv"
    if not tokens.is_file():
        token = secrets.token_hex(24)
        tokens.write_text(f'{token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n')
        tokens.chmod(0o600)
    return tokens.read_text().split(",", 1)[0]


def server_url(settings: Settings) -> str:
    return f"https://{settings.host}:{settings.apiserver_port}"


def write_kubeconfig(settings: Settings) -> Path:
    d = kube_dir(settings)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "dv-local", "cluster": {
            "server": server_url(settings), "certificate-authority": str(d / "ca.crt")}}],
        "users": [{"name": ADMIN_USER, "user": {"token": admin_token(settings)}}],
        "contexts": [{"name": "dv-local", "context": {"cluster": "dv-local", "user": ADMIN_USER}}],
        "current-context": "dv-local",
    }
    text = json.dumps(config, indent=2)
    path = settings.kubeconfig
    if path.exists() and path.read_text() == text:
        return path
    # `dvstack up` on a running stack writes it again while clients (helm, kubectl, tests)
    # read it: written in place, a reader could find it empty and fall back to
    # localhost:8080. A new file renamed over it is whole to every reader.
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.chmod(0o600)
    partial.replace(path)
    return path


def _healthy(settings: Settings, path: str) -> bool:
    ctx = ssl.create_default_context(cafile=str(kube_dir(settings) / "ca.crt"))
    req = urllib.request.Request(
        server_url(settings) + path,
        headers={"Authorization": f"Bearer {admin_token(settings)}"},
    )
    with urllib.request.urlopen(req, context=ctx, timeout=3) as resp:
        return bool(resp.status == 200)


def _etcd_healthy(settings: Settings) -> bool:
    url = f"http://127.0.0.1:{settings.etcd_port}/health"
    with urllib.request.urlopen(url, timeout=2) as resp:
        return bool(json.loads(resp.read()).get("health") == "true")


def start_kube_api(settings: Settings, bins: KubeBinaries) -> None:
    ensure_pki(settings)
    # The API server's identity towards a kubelet (logs, exec, port-forward).
    issue_cert(settings, "apiserver-kubelet-client",
               "/O=system:masters/CN=kube-apiserver-kubelet-client", client=True)
    d = kube_dir(settings)
    admin_token(settings)
    if not processes.running(settings, "etcd"):
        data = settings.state_dir / "etcd"
        processes.start(settings, "etcd", [
            str(bins.etcd), "--name", "dv", "--data-dir", str(data),
            "--listen-client-urls", f"http://127.0.0.1:{settings.etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{settings.etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{settings.etcd_peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{settings.etcd_peer_port}",
            "--initial-cluster", f"dv=http://127.0.0.1:{settings.etcd_peer_port}",
            "--unsafe-no-fsync", "--quota-backend-bytes", str(2 * 1024**3),
        ])
    wait_for(lambda: _etcd_healthy(settings), timeout=60, what="etcd to become healthy",
             on_timeout=lambda: processes.tail(processes.log_file(settings, "etcd")))

    if not processes.running(settings, "kube-apiserver"):
        processes.start(settings, "kube-apiserver", [
            str(bins.apiserver),
            f"--etcd-servers=http://127.0.0.1:{settings.etcd_port}",
            f"--bind-address={settings.host}", f"--advertise-address={settings.host}",
            f"--secure-port={settings.apiserver_port}",
            f"--tls-cert-file={d / 'apiserver.crt'}", f"--tls-private-key-file={d / 'apiserver.key'}",
            f"--client-ca-file={d / 'ca.crt'}",
            f"--token-auth-file={d / 'tokens.csv'}",
            # Node: a kubelet reads only what its own pods need.
            "--authorization-mode=Node,RBAC",
            f"--kubelet-client-certificate={d / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={d / 'apiserver-kubelet-client.key'}",
            "--kubelet-preferred-address-types=InternalIP",
            "--service-cluster-ip-range=10.0.0.0/24",
            f"--service-account-issuer={server_url(settings)}",
            f"--service-account-key-file={d / 'sa.pub'}",
            f"--service-account-signing-key-file={d / 'sa.key'}",
            f"--api-audiences={server_url(settings)}",
            "--allow-privileged=true",
            f"--cert-dir={d / 'certs'}",
            "--enable-priority-and-fairness=false",
            "--profiling=false",
            "--v=1",
        ])
    wait_for(lambda: _healthy(settings, "/readyz"), timeout=120,
             what="kube-apiserver /readyz",
             on_timeout=lambda: processes.tail(processes.log_file(settings, "kube-apiserver")))
    kubeconfig = write_kubeconfig(settings)

    if not processes.running(settings, "kube-controller-manager"):
        processes.start(settings, "kube-controller-manager", [
            str(bins.controller_manager),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--secure-port={settings.controller_manager_port}",
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
            "--use-service-account-credentials=false",
            f"--service-account-private-key-file={d / 'sa.key'}",
            f"--root-ca-file={d / 'ca.crt'}",
            # No cloud here: run the controllers whose behaviour the operator relies on
            # (GC of owned objects, namespace deletion, service accounts and their tokens,
            # workloads for the chart). Node lifecycle only for a real node: it lifts the
            # not-ready taint kubelet registers with, and would mark the stand-in's Node
            # (which posts no heartbeats) unreachable.
            "--controllers=*,-node-ipam-controller,"
            + ("" if settings.node else "-node-lifecycle-controller,")
            + "-cloud-node-lifecycle-controller,-service-lb-controller,-node-route-controller,"
            "-persistentvolume-binder-controller,-persistentvolume-attach-detach-controller,"
            "-persistentvolume-expander-controller,-ttl-controller,-taint-eviction-controller,"
            "-device-taint-eviction-controller",
            f"--cert-dir={d / 'kcm-certs'}",
            "--v=1",
        ])
    wait_for(lambda: _default_serviceaccount_exists(settings), timeout=120,
             what="kube-controller-manager to create the default ServiceAccount",
             on_timeout=lambda: processes.tail(
                 processes.log_file(settings, "kube-controller-manager")))


def _default_serviceaccount_exists(settings: Settings) -> bool:
    try:
        return _healthy(settings, "/api/v1/namespaces/default/serviceaccounts/default")
    except urllib.error.HTTPError:
        return False


def stop_kube_api(settings: Settings) -> None:
    for name in ("kube-controller-manager", "kube-apiserver", "etcd"):
        processes.stop(settings, name)
