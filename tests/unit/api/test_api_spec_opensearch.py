"""An OpenSearch sink in the spec: exactly one sink, its own revision, no SQL assertions."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from derived_views.api.spec import DerivedViewSpec
from derived_views.core.job.job_config import job_config
from derived_views.core.revision import revision_of

POSTGRES: dict[str, Any] = {
    "source": {"kafka": {"bootstrapServers": "kafka:9092"}, "topics": ["orders"],
               "schema": "order_id STRING, amount DOUBLE"},
    "transform": {"sql": "SELECT * FROM events"},
    "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "orders"},
             "primaryKey": ["order_id"]},
}
POSTGRES_REVISION = "6432aa3735"
"""revision_of(POSTGRES) as computed by the code before OpenSearch existed."""
OPENSEARCH: dict[str, Any] = {
    **POSTGRES, "sink": {"opensearch": {"secretRef": {"name": "search"}, "index": "orders"},
                         "primaryKey": ["order_id"]}}


def test_the_kind_neutral_names_of_an_opensearch_sink() -> None:
    sink = DerivedViewSpec.model_validate(OPENSEARCH).sink
    assert (sink.kind, sink.alias, sink.db_schema, sink.secret_ref.name) == (
        "opensearch", "orders", "", "search")
    assert sink.qualified_alias == "orders"
    assert DerivedViewSpec.model_validate(POSTGRES).sink.qualified_alias == "public.orders"


@pytest.mark.parametrize("sink", [
    {"primaryKey": ["order_id"]},
    {"postgres": {"secretRef": {"name": "db"}, "table": "orders"},
     "opensearch": {"secretRef": {"name": "s"}, "index": "orders"}, "primaryKey": ["order_id"]},
])
def test_exactly_one_sink(sink: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="set exactly one of postgres and opensearch"):
        DerivedViewSpec.model_validate({**POSTGRES, "sink": sink})


@pytest.mark.parametrize("index", ["Orders", "_orders", "-orders", "a" * 41, "or ders"])
def test_opensearch_index_names(index: str) -> None:
    body = copy.deepcopy(OPENSEARCH)
    body["sink"]["opensearch"]["index"] = index
    with pytest.raises(ValidationError, match="index"):
        DerivedViewSpec.model_validate(body)


def test_sql_assertions_are_refused_for_opensearch() -> None:
    body = {**OPENSEARCH, "cutover": {"checks": {"assertions": [
        {"name": "none-negative", "sql": "SELECT 1 FROM {index} WHERE amount < 0"}]}}}
    with pytest.raises(ValidationError, match="rowCount and keySample only"):
        DerivedViewSpec.model_validate(body)
    DerivedViewSpec.model_validate({**OPENSEARCH, "cutover": {"checks": {
        "rowCount": {"maxDifference": 0}, "keySample": {"size": 10}}}})


def test_the_same_view_in_another_sink_is_another_revision() -> None:
    assert revision_of(DerivedViewSpec.model_validate(OPENSEARCH)) != revision_of(
        DerivedViewSpec.model_validate(POSTGRES))


def test_a_postgres_revision_is_unchanged_by_the_second_sink() -> None:
    # The hash of a PostgreSQL view must not move, or every running view would replay on
    # upgrade.
    assert revision_of(DerivedViewSpec.model_validate(POSTGRES)) == POSTGRES_REVISION


def test_the_job_hears_of_the_index() -> None:
    spec = DerivedViewSpec.model_validate(OPENSEARCH)
    revision = revision_of(spec)
    sink = job_config(uid="u-1", spec=spec, namespace="shop", view="orders", revision=revision,
                      checkpoint_location="/c", ledger_table="dv_ledger")["sink"]
    assert sink == {"kind": "opensearch", "table": f"orders__{revision}",
                    "primaryKey": ["order_id"], "ledgerTable": "dv_ledger"}
    # its Secret's keys are read by the job from the mounted files (render tests'
    # test_kafka_secret_contract.py, test_the_opensearch_sink_secret_is_read_by_its_keys)
