"""plan(spec, observed, now) -> Plan: every decision the operator makes, as a pure function.

The shell records the returned status (with its intent) before carrying out
the actions, so a restarted operator replans from the same observation and
resumes.  Invariants (property-tested): at most one revision is Active; once
the view has served, the alias only ever moves to an existing index whose lag
has held under the gate, and the alias's target is never dropped.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from derived_views import naming
from derived_views.planning.actions import (
    Action,
    CreateSparkApplication,
    DeleteSparkApplication,
    DropAlias,
    DropIndex,
    EmitEvent,
    RemoveFinalizer,
    SwitchAlias,
)
from derived_views.planning.observed import Observed, TopicPartition
from derived_views.resource.spec import CutoverMode, DeletionPolicy, DerivedViewSpec
from derived_views.resource.status import Condition, DerivedViewStatus, Lag, Phase, RevisionStatus
from derived_views.revision import revision_of

PROMOTE_ANNOTATION = "derivedviews.io/promote"
PAUSE_ANNOTATION = "derivedviews.io/paused"
KEEP_FINISHED = 5  # Retired/Superseded/Failed revisions kept in status for history

BUILDING = frozenset({Phase.Pending, Phase.Backfilling, Phase.CaughtUp})


@dataclass(frozen=True)
class Plan:
    status: DerivedViewStatus
    actions: tuple[Action, ...]


def _ts(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(s: str | None) -> dt.datetime | None:
    return dt.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC) if s else None


def lag_of(ends: dict[TopicPartition, int], committed: dict[TopicPartition, int],
           committed_at: dt.datetime | None, now: dt.datetime) -> Lag:
    """Per partition: end offset minus the offset committed in the index (0 if none yet)."""
    parts = {f"{t}/{p}": max(end - committed.get((t, p), 0), 0) for (t, p), end in sorted(ends.items())}
    total = sum(parts.values())
    seconds = 0.0 if total == 0 else (
        (now - committed_at).total_seconds() if committed_at is not None else None)
    return Lag(messages=total, seconds=seconds, partitions=parts)


class _Planner:
    def __init__(self, spec: DerivedViewSpec, observed: Observed, now: dt.datetime) -> None:
        self.spec, self.obs, self.now = spec, observed, now
        self.revision = revision_of(spec)
        self.base = spec.sink.postgres.table
        self.actions: list[Action] = []
        self.revs: dict[str, RevisionStatus] = {r.revision: r for r in observed.status.revisions}
        self.active: str | None = observed.status.active.revision if observed.status.active else None
        self.degraded: tuple[str, str] | None = None

    # helpers ---------------------------------------------------------------
    def index(self, revision: str) -> str:
        return naming.index_table(self.base, revision)

    def set(self, revision: str, **changes: object) -> RevisionStatus:
        current = self.revs[revision]
        if "phase" in changes and changes["phase"] != current.phase:
            changes.setdefault("since", _ts(self.now))
        updated = current.model_copy(update=changes)
        self.revs[revision] = updated
        return updated

    def emit(self, reason: str, message: str, type_: str = "Normal") -> None:
        self.actions.append(EmitEvent(reason, message, type_))

    def stop_job(self, revision: str) -> None:
        if revision in self.obs.jobs:
            self.actions.append(DeleteSparkApplication(revision))

    def drop(self, revision: str) -> None:
        index = self.index(revision)
        if index == self.obs.alias_target:
            return  # never drop what readers are served from
        if index in self.obs.indexes:
            self.actions.append(DropIndex(index, revision))

    def lag(self, revision: str) -> Lag | None:
        if self.obs.topic_ends is None:
            return None
        progress = self.obs.progress.get(revision)
        return lag_of(dict(self.obs.topic_ends), dict(progress.committed) if progress else {},
                      progress.committed_at if progress else None, self.now)

    # steps -----------------------------------------------------------------
    def deletion(self) -> Plan:
        for revision in sorted(self.obs.jobs):
            self.actions.append(DeleteSparkApplication(revision))
        if self.spec.deletionPolicy == DeletionPolicy.Delete:
            if self.obs.alias_target is not None:
                self.actions.append(DropAlias())
            for index in sorted(self.obs.indexes):
                revision = index.rsplit("__", 1)[-1]
                self.actions.append(DropIndex(index, revision))
            self.emit("Deleted", "Deleted the view's jobs, alias and indexes.")
        else:
            self.emit("Deleted", "Deleted the view's jobs; kept its alias and indexes (Retain).")
        self.actions.append(RemoveFinalizer())
        return Plan(self.observed_status(intent="Deleting"), tuple(self.actions))

    def adopt_switched_alias(self) -> None:
        """A cutover whose alias switch landed but whose status did not: finish it."""
        target = self.obs.alias_target
        if target is None:
            return
        for revision, rs in list(self.revs.items()):
            if rs.index == target and revision != self.active and rs.phase in BUILDING:
                self.cutover_bookkeeping(revision)

    def ensure_record(self) -> None:
        rev = self.revision
        if rev == self.active:
            return
        existing = self.revs.get(rev)
        if existing is not None and existing.phase in BUILDING:
            return
        if existing is not None and existing.phase == Phase.Failed and \
                self.obs.annotations.get("derivedviews.io/retry") != existing.createdAt:
            return  # a failed revision waits for a spec change or an explicit retry
        resuming = (existing is not None and existing.phase == Phase.Retiring
                    and self.index(rev) in self.obs.indexes)
        # Any other candidate is superseded by the new spec.
        for other, rs in list(self.revs.items()):
            if other != rev and other != self.active and rs.phase in BUILDING:
                self.stop_job(other)
                self.drop(other)
                self.set(other, phase=Phase.Superseded, message=f"superseded by {rev}",
                         caughtUpSince=None)
                self.emit("Superseded", f"Superseded candidate {other} with {rev}.")
        self.revs[rev] = RevisionStatus(
            revision=rev, index=self.index(rev), phase=Phase.Backfilling,
            sparkApplication=None, since=_ts(self.now), createdAt=_ts(self.now),
            message="resuming from its checkpoint (rollback)" if resuming else "replaying from offset 0")
        if resuming:
            self.emit("RollbackStarted", f"Resumed retained revision {rev} from its checkpoint.")
        else:
            self.emit("BackfillStarted", f"Started replaying revision {rev} from offset 0.")

    def keep_job(self, revision: str) -> None:
        job = self.obs.jobs.get(revision)
        if job is None:
            self.actions.append(CreateSparkApplication(revision))

    def candidate_step(self) -> None:
        rev = self.revision
        if rev == self.active:
            return
        rs = self.revs.get(rev)
        if rs is None or rs.phase not in BUILDING:
            if rs is not None and rs.phase == Phase.Failed:
                self.degraded = ("JobFailed" if "deadline" not in (rs.message or "") else
                                 "DeadlineExceeded", rs.message or "")
            return
        job = self.obs.jobs.get(rev)
        if job is not None and job.failed:
            self.set(rev, phase=Phase.Failed, message=f"job failed: {job.error}", caughtUpSince=None)
            self.degraded = ("JobFailed", f"revision {rev}: {job.error}")
            self.emit("JobFailed", f"Revision {rev} failed after its retries: {job.error}", "Warning")
            return
        created = _parse(rs.createdAt) or self.now
        if (self.now - created).total_seconds() > self.spec.cutover.deadlineSeconds:
            self.stop_job(rev)
            self.drop(rev)
            message = (f"deadline of {self.spec.cutover.deadlineSeconds}s passed before cutover")
            self.set(rev, phase=Phase.Failed, message=message, caughtUpSince=None)
            self.degraded = ("DeadlineExceeded", f"revision {rev}: {message}")
            self.emit("DeadlineExceeded", f"Aborted revision {rev}: {message}.", "Warning")
            return
        self.keep_job(rev)
        lag = self.lag(rev)
        if lag is None:
            return  # Kafka unreachable this time: no gate decision without the log's end
        gate_holds = (lag.messages is not None and lag.messages <= self.spec.cutover.maxLagMessages
                      and self.index(rev) in self.obs.indexes)
        since = _parse(rs.caughtUpSince) if gate_holds else None
        if gate_holds and since is None:
            since = self.now
        phase = Phase.CaughtUp if gate_holds else Phase.Backfilling
        rs = self.set(rev, lag=lag, caughtUpSince=_ts(since) if since else None, phase=phase)
        stable = since is not None and \
            (self.now - since).total_seconds() >= self.spec.cutover.stableForSeconds
        promoted = (self.spec.cutover.mode == CutoverMode.auto
                    or self.obs.annotations.get(PROMOTE_ANNOTATION) == rev)
        if stable and promoted:
            previous = self.revs[self.active].index if self.active else None
            self.actions.append(SwitchAlias(self.index(rev), previous))
            self.cutover_bookkeeping(rev)

    def cutover_bookkeeping(self, rev: str) -> None:
        old = self.active
        self.set(rev, phase=Phase.Active, message=None)
        if old is not None and old in self.revs:
            retire_after = self.now + dt.timedelta(seconds=self.spec.cutover.retainPreviousSeconds)
            self.stop_job(old)
            self.set(old, phase=Phase.Retiring, retireAfter=_ts(retire_after),
                     message=f"replaced by {rev}", caughtUpSince=None)
            self.emit("CutoverCompleted", f"Switched readers from {old} to {rev}.")
        else:
            self.emit("CutoverCompleted", f"Started serving revision {rev}.")
        self.active = rev

    def active_step(self) -> None:
        if self.active is None:
            return
        rs = self.revs[self.active]
        switching = any(isinstance(a, SwitchAlias) for a in self.actions)
        if not switching and self.obs.alias_target not in (None, rs.index) \
                and rs.index in self.obs.indexes:
            # Someone moved the alias: put it back on the active index.
            self.actions.append(SwitchAlias(rs.index, self.obs.alias_target))
        job = self.obs.jobs.get(self.active)
        if job is not None and job.failed:
            self.degraded = ("ActiveJobFailed", f"active revision {self.active}: {job.error}")
        elif self.obs.annotations.get(PAUSE_ANNOTATION) != "true":
            self.keep_job(self.active)
        lag = self.lag(self.active)
        if lag is not None:
            self.set(self.active, lag=lag)

    def retire_step(self) -> None:
        for revision, rs in list(self.revs.items()):
            if revision == self.active or revision == self.revision:
                continue
            if rs.phase == Phase.Retiring:
                self.stop_job(revision)
                due = _parse(rs.retireAfter)
                if due is not None and self.now >= due:
                    self.drop(revision)
                    self.set(revision, phase=Phase.Retired, message="index dropped")
                    self.emit("Retired", f"Dropped the index of retired revision {revision}.")
            elif rs.phase in (Phase.Superseded, Phase.Failed, Phase.Retired):
                self.stop_job(revision)

    # status ----------------------------------------------------------------
    def conditions(self) -> list[Condition]:
        previous = {c.type: c for c in self.obs.status.conditions}
        cand = self.revs.get(self.revision) if self.revision != self.active else None
        building = cand is not None and cand.phase in BUILDING
        switches = [a.to_index for a in self.actions if isinstance(a, SwitchAlias)]
        alias_after = switches[-1] if switches else self.obs.alias_target
        ready = self.active == self.revision and alias_after == self.index(self.revision)
        caught_up = (cand.phase == Phase.CaughtUp) if building and cand else ready
        lag_text = (f"lag {cand.lag.messages} messages" if cand and cand.lag and
                    cand.lag.messages is not None else "lag unknown")
        wanted = [
            ("Ready", ready, "Serving" if ready else ("Backfilling" if building else
                                                      (self.degraded or ("NotReady", ""))[0]),
             f"alias serves revision {self.active}" if ready else
             (f"revision {self.revision} is backfilling, {lag_text}" if building else
              (self.degraded or ("", "no serving revision"))[1])),
            ("Reconciling", building, "Backfilling" if building else "Idle",
             f"revision {self.revision}: {lag_text}" if building else ""),
            ("Stalled", self.degraded is not None,
             self.degraded[0] if self.degraded else "Progressing",
             self.degraded[1] if self.degraded else ""),
            ("CaughtUp", caught_up, "LagWithinGate" if caught_up else "LagAboveGate", lag_text),
            ("Degraded", self.degraded is not None,
             self.degraded[0] if self.degraded else "Healthy",
             self.degraded[1] if self.degraded else ""),
        ]
        out = []
        for type_, ok, reason, message in wanted:
            status = "True" if ok else "False"
            before = previous.get(type_)
            changed_at = (before.lastTransitionTime if before is not None and before.status == status
                          else _ts(self.now))
            out.append(Condition(type=type_, status=status, reason=reason, message=message,
                                 lastTransitionTime=changed_at,
                                 observedGeneration=self.obs.generation))
        return out

    def observed_status(self, intent: str | None = None) -> DerivedViewStatus:
        live = [r for r in self.revs.values() if r.phase not in (Phase.Retired, Phase.Superseded,
                                                                Phase.Failed)]
        finished = [r for r in self.revs.values() if r not in live][-KEEP_FINISHED:]
        revisions = sorted(live + finished, key=lambda r: (r.createdAt or "", r.revision))
        active = self.revs.get(self.active) if self.active else None
        cand = self.revs.get(self.revision) if self.revision != self.active else None
        return DerivedViewStatus(
            observedGeneration=self.obs.generation,
            phase=(cand.phase.value if cand is not None else
                   (Phase.Active.value if active is not None else Phase.Pending.value)),
            active=active, candidate=cand, revisions=revisions,
            conditions=self.conditions(), intent=intent)

    def run(self) -> Plan:
        if self.obs.deleting:
            return self.deletion()
        if self.obs.annotations.get(PAUSE_ANNOTATION) == "true":
            return Plan(self.observed_status(intent=None), ())
        self.adopt_switched_alias()
        self.ensure_record()
        self.candidate_step()
        self.active_step()
        self.retire_step()
        intent = ", ".join(type(a).__name__ for a in self.actions
                           if not isinstance(a, EmitEvent)) or None
        return Plan(self.observed_status(intent=intent), tuple(self.actions))


def plan(spec: DerivedViewSpec, observed: Observed, now: dt.datetime) -> Plan:
    """Decide what to do for one view, given one observation and the time."""
    return _Planner(spec, observed, now).run()
