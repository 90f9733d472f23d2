"""The stack's unit tests resolve settings as a machine without the real node does, unless
a test says otherwise: with `DV_NODE` unset, `load()` would follow this machine."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_node_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DV_NODE", "0")
