"""When a replay's first batch is bounded on its own (dvjob.first_batch)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from dvjob.config import JobConfig, parse_config
from dvjob.errors import ConfigError
from dvjob.first_batch import FIRST_BATCH_OFFSETS, first_batch_bound, first_batch_setting

BASE: dict[str, Any] = {
    "view": "shop/orders", "revision": "r1",
    "source": {"bootstrapServers": "k:9092", "topics": ["orders"], "format": "json",
               "schema": "id INT", "maxOffsetsPerTrigger": 1_000_000, "kafkaOptions": {}},
    "transform": {"sql": "SELECT id FROM events"},
    "sink": {"table": "t__r1", "schema": "public", "primaryKey": ["id"],
             "ledgerTable": "dv_ledger"},
    "checkpointLocation": "/c", "trigger": {"processingTimeSeconds": 1},
}


def config(bound: int | None = 1_000_000, trigger: dict[str, Any] | None = None) -> JobConfig:
    doc = copy.deepcopy(BASE)
    doc["source"]["maxOffsetsPerTrigger"] = bound
    if trigger is not None:
        doc["trigger"] = trigger
    return parse_config(json.dumps(doc))


def test_a_first_replay_with_a_larger_bound_gets_a_first_batch_of_its_own() -> None:
    assert first_batch_bound(config(), committed_batches=0) == FIRST_BATCH_OFFSETS == 50_000
    assert first_batch_bound(config(bound=None), committed_batches=0) == FIRST_BATCH_OFFSETS
    assert first_batch_bound(config(), committed_batches=0, first=500) == 500


@pytest.mark.parametrize(("job", "committed", "first"), [
    (config(), 1, FIRST_BATCH_OFFSETS),                    # resuming: batches are committed
    (config(bound=50_000), 0, FIRST_BATCH_OFFSETS),        # the view's bound is no larger
    (config(bound=2_000), 0, FIRST_BATCH_OFFSETS),
    (config(trigger={"availableNow": True}), 0, FIRST_BATCH_OFFSETS),  # a run to the end
    (config(), 0, 0),                                      # switched off by configuration
])
def test_otherwise_the_query_starts_with_the_view_s_bound(job: JobConfig, committed: int,
                                                          first: int) -> None:
    assert first_batch_bound(job, committed, first) is None


@pytest.mark.parametrize(("value", "bound"), [(None, FIRST_BATCH_OFFSETS), ("", FIRST_BATCH_OFFSETS),
                                              ("0", 0), ("500", 500)])
def test_the_spark_setting_gives_the_bound(value: str | None, bound: int) -> None:
    assert first_batch_setting(value) == bound


@pytest.mark.parametrize("value", ["-1", "lots", "1.5"])
def test_a_setting_that_is_no_count_is_refused_naming_it(value: str) -> None:
    with pytest.raises(ConfigError, match=rf"spark.derivedviews.firstBatchOffsets is '{value}'"):
        first_batch_setting(value)
