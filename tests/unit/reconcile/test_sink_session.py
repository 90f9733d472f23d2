"""Opening a view's sink: the reasons a pass reports when it cannot, before any connection.

The Kubernetes side is a stand-in holding Secrets in memory; nothing here
reaches a database (tests/integration and tests/e2e drive the real one).
"""

from __future__ import annotations

from typing import Any

import pytest

from derived_views.adapters.sink import SINK_KINDS, open_session
from derived_views.adapters.sink_contract import SinkPools, SinkSecretInvalid
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus
from derived_views.core.settings import CheckpointSettings, Settings, SparkSettings
from derived_views.reconcile.observe import sink_reading
from derived_views.reconcile.secrets import PassSecrets
from support.stand_ins.deps import pass_deps
from support.stand_ins.kube import FakeKube

VIEW = ("shop", "orders")
CONFIG = Settings(spark=SparkSettings(template="", image="i"), checkpoints=CheckpointSettings(base="/c"))

SPEC = DerivedViewSpec.model_validate({
    "source": {"kafka": {"bootstrapServers": "k:9092"}, "topics": ["a"], "schema": "a STRING"},
    "transform": {"sql": "SELECT a FROM events"},
    "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "orders", "schema": "shop"},
             "primaryKey": ["a"]}})


def _reading(secrets: dict[str, dict[str, str]]) -> Any:
    kube = FakeKube(secrets=secrets)
    deps = pass_deps(kube, settings=CONFIG)
    return sink_reading(SPEC, DerivedViewStatus(), VIEW, deps,
                 PassSecrets(kube, "shop", CONFIG.tenancy), dropping=False)


def test_the_core_reads_the_sink_through_kind_neutral_names() -> None:
    assert (SPEC.sink.kind, SPEC.sink.alias, SPEC.sink.db_schema, SPEC.sink.secret_ref.name) == (
        "postgres", "orders", "shop", "db")
    assert SPEC.sink.kind in SINK_KINDS


def test_a_secret_missing_keys_is_reported_by_name_without_connecting() -> None:
    reading = _reading({"db": {"host": "h", "user": "u"}})
    assert reading.session is None and reading.observed is None
    assert reading.problem == ("SinkSecretInvalid", "secret shop/db: sink secret is missing "
                               "key(s): database, password")


def test_a_missing_secret_names_the_field_to_fix() -> None:
    reason, message = _reading({}).problem
    assert reason == "SecretMissing"
    assert message.endswith("or fix spec.sink.postgres.secretRef")


def test_a_non_numeric_port_is_an_invalid_secret_not_a_crash() -> None:
    with pytest.raises(SinkSecretInvalid, match="'port' is not a number: 'x'"):
        open_session(SPEC, {"host": "h", "database": "d", "user": "u", "password": "p",
                            "port": "x"}, CONFIG, SinkPools())
