"""The local OpenSearch node's opensearch.yml: one loopback node on the stack's ports."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from dvstack.services import opensearch_server
from dvstack.settings import load


def test_single_loopback_node_on_the_configured_ports(tmp_path: Path) -> None:
    settings = dataclasses.replace(load(), opensearch_port=20200, opensearch_transport_port=20300)
    node = tmp_path / "node dir"
    config = yaml.safe_load(opensearch_server.render_config(settings, node))
    assert config["discovery.type"] == "single-node"
    assert config["network.host"] == "127.0.0.1"
    assert (config["http.port"], config["transport.port"]) == (20200, 20300)
    assert (config["path.data"], config["path.logs"]) == (str(node / "data"), str(node / "logs"))
    # Nearly full development disks must not make indices read-only.
    assert config["cluster.routing.allocation.disk.threshold_enabled"] is False
    assert "action.auto_create_index" not in config
    assert opensearch_server.opensearch_url(settings) == "http://127.0.0.1:20200"


def test_ports_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DV_OPENSEARCH_PORT", "21200")
    monkeypatch.setenv("DV_OPENSEARCH_TRANSPORT_PORT", "21300")
    settings = load()
    assert (settings.opensearch_port, settings.opensearch_transport_port) == (21200, 21300)
