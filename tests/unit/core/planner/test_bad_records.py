"""The bad-record policy on the operator side: spec rules, what it changes, where counts show."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from derived_views.api.crd import crd
from derived_views.api.spec import DEAD_LETTER_MESSAGE, DEAD_LETTER_RULE, DerivedViewSpec
from derived_views.api.status import DerivedViewStatus
from derived_views.cli import rows
from derived_views.core import actions as A
from derived_views.core.job.job_config import job_config
from derived_views.core.observed import (
    LedgerPosition,
    Observed,
    SinkObserved,
    SparkApplicationObserved,
    ViewObserved,
)
from derived_views.core.plan import plan
from derived_views.core.revision import job_settings_of, revision_of
from derived_views.process.metrics import view_samples
from support.world.samples import (
    NAMESPACE,
    SECRET_LABELS,
    SQL_V1,
    T0,
    UID,
    VIEW,
    make_settings,
    make_spec,
    spec_body,
)

R1 = "71250ff800"
ENDS = {("orders", 0): 120, ("orders", 1): 80}


def with_policy(policy: dict[str, Any]) -> DerivedViewSpec:
    body = spec_body(SQL_V1)
    body["source"] = {**body["source"], "badRecords": policy}
    return DerivedViewSpec.model_validate(body)


@pytest.mark.parametrize("policy", [{"policy": "deadLetter"},
                                    {"policy": "skip", "deadLetterTopic": "orders-dead"}])
def test_a_dead_letter_topic_goes_with_dead_letters_only(policy: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="deadLetterTopic is required with policy "
                                              "deadLetter, and only then"):
        with_policy(policy)


def test_the_crd_carries_the_same_rule_and_a_default_of_fail() -> None:
    source = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["source"]["properties"]["badRecords"]
    assert source["x-kubernetes-validations"] == [{"rule": DEAD_LETTER_RULE,
                                                   "message": DEAD_LETTER_MESSAGE}]
    assert source["properties"]["policy"]["default"] == "fail"
    assert source["properties"]["policy"]["enum"] == ["fail", "skip", "deadLetter"]


def test_the_policy_is_a_job_setting_not_content() -> None:
    """Same revision (no replay), different job settings (restart from the checkpoint)."""
    default, skip = make_spec(SQL_V1), with_policy({"policy": "skip"})
    dead = with_policy({"policy": "deadLetter", "deadLetterTopic": "orders-dead"})
    assert revision_of(default) == revision_of(skip) == revision_of(dead)
    assert len({job_settings_of(default), job_settings_of(skip), job_settings_of(dead)}) == 3
    # an explicit default is the default: a view that spells it out does not restart
    assert job_settings_of(with_policy({"policy": "fail"})) == job_settings_of(default)


def test_the_job_gets_the_policy() -> None:
    spec = with_policy({"policy": "deadLetter", "deadLetterTopic": "orders-dead"})
    config = job_config(uid="u-1", namespace=NAMESPACE, view=VIEW, spec=spec,
                        revision=revision_of(spec),
                        checkpoint_location="s3a://c/x")
    assert config["source"]["badRecords"] == {"policy": "deadLetter",
                                              "deadLetterTopic": "orders-dead"}
    plain = job_config(uid="u-1", namespace=NAMESPACE, view=VIEW, spec=make_spec(SQL_V1),
                       revision=revision_of(make_spec(SQL_V1)), checkpoint_location="s3a://c/x")
    assert plain["source"]["badRecords"] == {"policy": "fail"}


def observed(bad: dict[str, int]) -> Observed:
    status = {"revisions": [{
        "revision": R1, "index": f"orders_by_customer__{R1}", "phase": "Active",
        "since": "2026-03-01T11:58:00Z", "sparkApplication": f"{VIEW}-{R1}",
        "checkpointLocation": "s3a://checkpoints/x", "startedAt": "2026-03-01T11:58:00Z",
        "content": {"topics": ["orders"], "format": "json",
                    "schema": "order_id STRING, customer_id STRING, amount DOUBLE",
                    "sql": SQL_V1, "primaryKey": ["customer_id"]}}],
        "active": {"revision": R1, "index": f"orders_by_customer__{R1}",
                   "since": "2026-03-01T11:58:00Z"}}
    return Observed(
        view=ViewObserved(NAMESPACE, VIEW, UID, 1, {}, ("derivedviews.io/cleanup",), None),
        status=DerivedViewStatus.model_validate(status), settings=make_settings(),
        spark_applications={R1: SparkApplicationObserved(f"{VIEW}-{R1}", R1, "RUNNING")},
        sink=SinkObserved(frozenset({f"orders_by_customer__{R1}"}),
                          f"orders_by_customer__{R1}", {R1: LedgerPosition(ENDS, T0)},
                          bad_records=bad),
        end_offsets=ENDS, secret_labels=SECRET_LABELS)


def status_after(bad: dict[str, int]) -> DerivedViewStatus:
    spec = make_spec(SQL_V1)
    assert revision_of(spec) == R1
    update = next(a for a in plan(spec, observed(bad), T0) if isinstance(a, A.UpdateStatus))
    return update.status


def test_counts_reach_the_revision_the_active_summary_and_the_bad_column() -> None:
    status = status_after({R1: 4})
    record = status.record(R1)
    assert record is not None and record.bad_records == 4
    assert status.active is not None and status.active.bad_records == 4
    assert status.bad_records == 4
    # a revision that left nothing out shows 0, not nothing: the two never look alike
    clean = status_after({})
    assert clean.bad_records == 0


def test_metrics_and_dv_status_show_the_count() -> None:
    status = status_after({R1: 4})
    samples = [s for s in view_samples(NAMESPACE, VIEW, status, {}) if s.gauge == "bad_records"]
    assert [(s.labels, s.value) for s in samples] == [((NAMESPACE, VIEW, R1, "active"), 4.0)]
    view = {"metadata": {"namespace": NAMESPACE, "name": VIEW, "creationTimestamp":
                         "2026-03-01T11:00:00Z"},
            "spec": {"source": {"badRecords": {"policy": "skip"}}},
            "status": status.model_dump(mode="json", by_alias=True, exclude_none=True)}
    assert rows.view_row(view, T0).bad_records == "4"
    assert [r.bad_records for r in rows.revision_rows(status, T0)] == ["4"]
    assert ("Bad records", "skip; 4 left out") in rows.header_lines(view, status)


def test_kubectl_get_shows_the_count_by_default() -> None:
    columns = crd()["spec"]["versions"][0]["additionalPrinterColumns"]
    bad = next(c for c in columns if c["name"] == "Bad")
    assert bad["jsonPath"] == ".status.badRecords" and "priority" not in bad
