"""Which passes fetch end offsets of their own (after their ledger read)."""

from __future__ import annotations

import datetime as dt

from derived_views.api.status import (
    ActiveStatus,
    CandidateStatus,
    DerivedViewStatus,
    Phase,
    RevisionStatus,
)
from derived_views.core.log.freshness import committed_beyond, decides_gate
from derived_views.core.observed import LedgerPosition, SinkObserved
from derived_views.core.revision import revision_of
from support.world.samples import make_spec

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
SPEC = make_spec()
SERVING = revision_of(SPEC)


def serving(**changes: object) -> DerivedViewStatus:
    status = DerivedViewStatus(active=ActiveStatus(revision=SERVING, index=f"o__{SERVING}",
                                                   since=T0))
    return status.model_copy(update=changes)


def test_an_idle_view_serving_its_spec_takes_the_shared_reading() -> None:
    assert not decides_gate(SPEC, serving())


def test_a_candidate_or_a_new_spec_or_a_followed_job_needs_a_fetch_of_its_own() -> None:
    building = CandidateStatus(revision="abc", index="o__abc", phase=Phase.Backfilling, since=T0)
    assert decides_gate(SPEC, serving(candidate=building))
    assert decides_gate(make_spec(sql="SELECT order_id FROM events"), serving())
    assert decides_gate(SPEC, DerivedViewStatus())  # nothing served yet
    followed = RevisionStatus(revision="old", index="o__old", phase=Phase.Retiring, since=T0,
                              spark_application="o-old", checkpoint_location="s3a://c/old",
                              started_at=T0, follow_until=T0 + dt.timedelta(minutes=5))
    assert decides_gate(SPEC, serving(revisions=[followed]))
    stopped = followed.model_copy(update={"follow_until": None})
    assert not decides_gate(SPEC, serving(revisions=[stopped]))


def test_a_commit_past_the_reading_asks_for_a_fresh_one() -> None:
    sink = SinkObserved(ledger={"r1": LedgerPosition({("orders", 0): 10, ("orders", 1): 7})})
    assert not committed_beyond(sink, {("orders", 0): 10, ("orders", 1): 9})
    assert committed_beyond(sink, {("orders", 0): 9, ("orders", 1): 9})
    assert not committed_beyond(sink, {("other", 0): 0})  # partitions it does not read
    assert not committed_beyond(None, {("orders", 0): 0})
    assert not committed_beyond(sink, None)
