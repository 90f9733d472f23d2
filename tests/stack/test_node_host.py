"""The node's hold on the host: a check that names what is left, and the claim that keeps a
machine to one node without taking a killed node's leftovers for the host as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dvstack.node import host as node_host
from dvstack.node.host import Claim


def test_the_host_check_names_each_thing_left_behind_and_each_changed_sysctl() -> None:
    before = {"mounts": ["/"], "cgroups": ["memory/a"], "iptables": ["filter :INPUT ACCEPT"],
              "links": ["eth0", "lo"], "netns": [], "run_containerd": False,
              "sysctls": {"net/ipv4/ip_forward": "0"}}
    assert node_host.host_changes(before, before) == []
    after = {**before, "mounts": ["/", "/run/x/shm"], "links": ["eth0", "lo", "dvnode0"],
             "iptables": ["filter :INPUT ACCEPT", "filter :KUBE-FIREWALL -"],
             "run_containerd": True, "sysctls": {"net/ipv4/ip_forward": "1"}}
    assert node_host.host_changes(before, after) == [
        "mounts: left behind /run/x/shm",
        "iptables: left behind filter :KUBE-FIREWALL -",
        "links: left behind dvnode0",
        "sysctl net/ipv4/ip_forward is '1', was '0'",
        "left behind /run/containerd",
    ]


def _claim(state_dir: str) -> Claim:
    return Claim(state_dir=state_dir, root=f"{state_dir}/node", run="/run/dvnode-1",
                 before={"links": ["lo"]})


@pytest.mark.parametrize(("claim", "alive", "expected"), [
    (None, False, "free"),
    ("/a/.stack", False, "ours"),
    ("/a/.stack", True, "ours"),  # a stack restarts its own node's daemons, keeping the snapshot
    ("/b/.stack", True, "busy"),
    ("/b/.stack", False, "stale"),
])
def test_a_claim_is_kept_refused_or_taken_back_by_whose_it_is_and_whether_it_runs(
        claim: str | None, alive: bool, expected: str) -> None:
    found = None if claim is None else _claim(claim)
    assert node_host.verdict(found, Path("/a/.stack"), alive=alive) == expected


def test_a_node_is_alive_while_a_daemon_started_with_its_files_runs_not_a_shim() -> None:
    root = "/b/.stack/node"
    kubelet = "/cache/bin/kubelet --config=/b/.stack/node/kubelet.yaml --v=1"
    shim = ("/usr/bin/containerd-shim-runc-v2 -namespace k8s.io -id 1 "
            "-address /run/dvnode-1/containerd.sock /b/.stack/node/containerd")
    other = "/cache/bin/kubelet --config=/b/.stack/nodes/kubelet.yaml"  # a sibling path
    assert node_host.daemon_alive({1: kubelet, 2: shim}, root)
    assert not node_host.daemon_alive({2: shim, 3: other}, root)
    assert not node_host.daemon_alive({}, root)


def test_a_claim_survives_its_round_trip_and_a_foreign_file_is_named_not_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "dvnode.json"
    monkeypatch.setenv(node_host.CLAIM_ENV, str(path))
    assert node_host.read_claim() is None
    node_host.write_claim(_claim("/a/.stack"))
    assert json.loads(path.read_text())["state_dir"] == "/a/.stack"
    assert node_host.read_claim() == _claim("/a/.stack")
    node_host.release_claim()
    assert not path.exists()
    path.write_text('{"pid": 12}')
    with pytest.raises(SystemExit, match=f"{path} is not a node claim this stack wrote"):
        node_host.read_claim()
