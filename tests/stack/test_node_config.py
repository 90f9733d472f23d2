"""The real node's configuration: one address for every service, the stack's own bridge and
range, an image archive containerd can import."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import ipaddress
import json
import tarfile
import tomllib
from pathlib import Path

import pytest
import yaml

from dvstack.cli import components
from dvstack.images import oci_archive
from dvstack.node import config as node_config
from dvstack.node import support as node_support
from dvstack.services import kafka_broker, postgres_server
from dvstack.settings import NODE_ADDRESS, Settings, load


def settings_in(tmp_path: Path, *, with_node: bool) -> Settings:
    return dataclasses.replace(load(), state_dir=tmp_path / "state", node=with_node)


def test_with_the_node_every_service_listens_and_advertises_on_the_node_address(
        tmp_path: Path) -> None:
    plain = settings_in(tmp_path, with_node=False)
    real = settings_in(tmp_path, with_node=True)
    assert plain.host == "127.0.0.1"
    assert real.host == "10.217.0.1" == NODE_ADDRESS
    assert kafka_broker.bootstrap(real) == f"10.217.0.1:{real.kafka_port}"
    assert postgres_server.listen_addresses(plain) == "127.0.0.1"
    assert postgres_server.listen_addresses(real) == "127.0.0.1,10.217.0.1"
    assert "host=10.217.0.1 " in postgres_server.conninfo(real)


def test_dv_node_takes_one_and_zero_and_refuses_anything_else(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DV_NODE", "1")
    assert load().node
    monkeypatch.setenv("DV_NODE", "0")
    assert not load().node
    monkeypatch.setenv("DV_NODE", "yes please")
    with pytest.raises(SystemExit, match=r"DV_NODE='yes please'.*auto"):
        load()


def test_dv_node_auto_or_unset_follows_the_running_stack(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DV_STATE_DIR", str(tmp_path))
    for value in ("auto", ""):
        monkeypatch.setenv("DV_NODE", value)
        (tmp_path / "stack.json").write_text(json.dumps({"node": True}))
        assert load().node
        (tmp_path / "stack.json").write_text(json.dumps({"node": False}))
        assert not load().node
        (tmp_path / "stack.json").unlink()


def test_dv_node_auto_runs_it_where_the_machine_can_and_unset_never(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DV_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("DV_NODE", "auto")
    monkeypatch.setattr(node_support, "host_reason", lambda: "the node needs root")
    assert not load().node
    monkeypatch.setattr(node_support, "host_reason", lambda: None)
    monkeypatch.setattr(node_support.shutil, "which", lambda cmd: None)  # no packages, no apt
    assert not load().node
    monkeypatch.setattr(node_support.shutil, "which",
                        lambda cmd: "/usr/bin/apt-get" if cmd == "apt-get" else None)
    assert load().node  # `up` installs the packages
    monkeypatch.delenv("DV_NODE")
    assert not load().node  # the stand-in alone unless asked


def test_pods_get_addresses_of_the_stack_own_range_through_its_bridge(tmp_path: Path) -> None:
    layout = node_config.layout(settings_in(tmp_path, with_node=True))
    conf = node_config.cni_config(layout)
    (bridge,) = conf["plugins"]  # type: ignore[misc]
    assert bridge["bridge"] == "dvnode0" and bridge["isGateway"]
    assert not bridge["ipMasq"]  # no CNI iptables chains on the host
    (rng,) = bridge["ipam"]["ranges"][0]
    subnet = ipaddress.ip_network(rng["subnet"])
    assert ipaddress.ip_address(rng["gateway"]) in subnet
    assert ipaddress.ip_address(rng["rangeStart"]) in subnet
    assert ipaddress.ip_address(rng["rangeEnd"]) in subnet
    assert rng["gateway"] == "10.217.0.1"
    assert Path(bridge["ipam"]["dataDir"]).is_relative_to(tmp_path)


def test_kubelet_and_containerd_keep_their_state_under_the_stack(tmp_path: Path) -> None:
    layout = node_config.layout(settings_in(tmp_path, with_node=True))
    kubelet = node_config.kubelet_config(layout)
    assert kubelet["clusterDNS"] == ["10.217.0.1"]
    assert kubelet["cgroupRoot"] == "/dvnode"
    assert kubelet["readOnlyPort"] == 0
    assert kubelet["authentication"]["anonymous"] == {"enabled": False}  # type: ignore[index]
    containerd = tomllib.loads(node_config.containerd_config(layout, "/usr/lib/cni"))
    assert Path(containerd["root"]).is_relative_to(tmp_path)
    cri = containerd["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["restrict_oom_score_adj"] is True
    assert cri["sandbox_image"] == "localhost/dv-pause:1"
    assert Path(cri["cni"]["conf_dir"]).is_relative_to(tmp_path)
    proxy = node_config.kube_proxy_config(layout, tmp_path / "kubeconfig")
    assert proxy["conntrack"]["maxPerCore"] == 0  # type: ignore[index]
    assert proxy["iptables"] == {"localhostNodePorts": False}
    assert yaml.safe_dump(proxy)


def test_the_pause_archive_is_an_oci_layout_whose_blobs_match_their_digests() -> None:
    data = oci_archive.image_archive("localhost/dv-pause:1",
                                     [oci_archive.File("/pause", b"\x7fELF binary")],
                                     entrypoint=["/pause"], user="65535:65535")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()  # type: ignore[union-attr]
                 if m.isfile()}
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    for name, blob in files.items():
        if name.startswith("blobs/sha256/"):
            assert name.rsplit("/", 1)[1] == hashlib.sha256(blob).hexdigest()
    (entry,) = json.loads(files["index.json"])["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == "localhost/dv-pause:1"
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == "1"
    manifest = json.loads(files["blobs/sha256/" + entry["digest"].split(":")[1]])
    config = json.loads(files["blobs/sha256/" + manifest["config"]["digest"].split(":")[1]])
    assert config["config"]["Entrypoint"] == ["/pause"]
    layer = files["blobs/sha256/" + manifest["layers"][0]["digest"].split(":")[1]]
    assert config["rootfs"]["diff_ids"] == [manifest["layers"][0]["digest"]]
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        (member,) = tar.getmembers()
        assert member.name == "pause" and member.mode == 0o755
        assert tar.extractfile(member).read() == b"\x7fELF binary"  # type: ignore[union-attr]


def test_the_node_mode_adds_the_nodes_daemons_beside_the_stand_in(tmp_path: Path) -> None:
    """The Spark Operator is no process of the stack's: its chart runs it as pods."""
    plain = components(settings_in(tmp_path, with_node=False))
    real = components(settings_in(tmp_path, with_node=True))
    assert "spark-executor" in plain and "kubelet" not in plain
    assert "spark-executor" in real  # for speed, in the namespaces not labelled for the node
    assert {"containerd", "kubelet", "kube-proxy", "kube-scheduler", "coredns"} <= set(real)
    assert not [c for c in real if "spark-operator" in c]
    assert set(plain) & set(real) >= {"postgres", "kube-apiserver", "kafka", "opensearch"}


def test_an_operator_beside_the_node_is_allowed_the_stack_kafka_and_keeps_its_policy() -> None:
    from dvstack.testing.replay import kafka_tenancy_env

    assert kafka_tenancy_env("127.0.0.1:19092") == {}
    assert kafka_tenancy_env("127.0.0.1:19092", '{"python": {"enabled": true}}') == {
        "DV_TENANCY_POLICY": '{"python": {"enabled": true}}'}
    policy = json.loads(kafka_tenancy_env("10.217.0.1:19092",
                                          '{"python": {"enabled": true}}')["DV_TENANCY_POLICY"])
    assert policy == {"python": {"enabled": True}, "kafka": {"clusters": [
        {"namespaces": ["*"], "bootstrapServers": ["127.0.0.1:*", "localhost:*"]},
        {"namespaces": ["*"], "bootstrapServers": ["10.217.0.1:*"]}]},
        "schemaRegistries": ["127.0.0.1:*", "localhost:*", "10.217.0.1:*"]}
    mine = ('{"kafka": {"clusters": [{"namespaces": ["a"], "bootstrapServers": ["k:1"]}]}, '
            '"schemaRegistries": ["r:1"]}')
    assert json.loads(kafka_tenancy_env("10.217.0.1:19092", mine)["DV_TENANCY_POLICY"]) == \
        json.loads(mine)  # a test's own clusters and registries are its own


def test_the_node_cgroup_weighs_as_several_busy_host_threads_not_as_one() -> None:
    # cgroup v1's default weight of a group is 1024, the weight of one runnable host thread:
    # with a dozen busy host threads the node's pods got a tenth of the machine.
    assert node_config.cpu_shares(2) == 8 * 1024
    assert node_config.cpu_shares(0) == 4 * 1024
    assert node_config.cpu_shares(1000) == 262144  # the kernel's maximum
