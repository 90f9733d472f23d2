"""What the operator asks of a sink: the contract every sink session implements.

Reconcile speaks only this interface: observe the indexes, the alias and the
ledger; run the cutover checks; switch the alias; drop an alias or an index.
A leaf among the adapters: the sessions (`postgres_session`, `opensearch_session`)
import it, and the registry that picks a session for a view's sink kind
(`adapters.sink.open_session`) imports them, so neither imports the other's importer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus
from derived_views.core.check_runs import CheckRequest
from derived_views.core.cutover.checks import Measurement
from derived_views.core.cutover.monotonic import Guard
from derived_views.core.observed import IndexOwner, LedgerPosition, SinkObserved


class SinkUnavailable(Exception):
    """The sink cannot be reached (the message carries no credentials)."""


class SinkSecretInvalid(ValueError):
    """The sink Secret's data cannot make a connection (missing or malformed keys)."""


CATCH_UP_POLL_SECONDS = 0.1
"""How often a switch waiting for the candidate to reach the serving ledger reads it again."""


class AliasConflict(RuntimeError):
    """The alias is not where the switch expected it, or the alias or the index belongs to
    another view: someone else moved it, and the switch changes nothing."""


RATE_WINDOW_SECONDS = 30
"""How far back the earlier ledger entry is taken from, to measure a revision's commit rate."""
LEDGER_KEEP_BATCHES = 20
"""Newest ledger entries of a revision always kept, beyond what the commit rate reads."""


class SwitchDeferred(Exception):
    """The switch would take readers back in time (core.cutover.monotonic), or the active's writes
    could not be held long enough to tell: nothing changed; a later pass tries again."""


def wait_until_level(guard: Guard, read_heads: Callable[[], Mapping[str, LedgerPosition]], *,
                     held: bool) -> None:
    """Read the heads until the candidate is not behind (`guard.gap`) the serving ledger as
    the first read found it, for at most `guard.wait_seconds`; SwitchDeferred naming the gap
    when it stays.

    A sink calls it twice: first with nothing held, then with the serving index's writes
    held. The level is fixed at the first read because, with nothing held, the serving job
    goes on committing: a candidate must not have to be level with a moving head, which it
    is only by chance once its batches take longer than the trigger interval (core.cutover.monotonic).
    Held, the first read is the held level."""
    deadline = time.monotonic() + guard.wait_seconds
    level: LedgerPosition | None = None
    while True:
        heads = read_heads()
        level = level or heads.get(guard.active)
        gap = guard.gap({**heads, guard.active: level} if level is not None else heads)
        if not gap:
            return
        if time.monotonic() >= deadline:
            raise SwitchDeferred(guard.refusal(gap, held=held))
        time.sleep(CATCH_UP_POLL_SECONDS)


class SinkSession(Protocol):
    """One pass's connection to one view's sink; every method may raise to fail the pass
    (the next pass replans from a fresh observation)."""

    def observe(self, spec: DerivedViewSpec, status: DerivedViewStatus, *,
                dropping: bool) -> SinkObserved:
        """Indexes, alias target and owner, ledger heads, bad-record counts, what would block
        a switch, and, when `dropping` (deletionPolicy Delete), a drop. Reads only: the
        ledger is pruned by `prune_ledger`, a step of its own."""

    def prune_ledger(self) -> int:
        """Delete the ledger entries of the revisions the last `observe` read that neither
        resuming nor the commit rate needs (what a deleted entry counted of bad records is
        kept in an entry that stays); returns how many went. Nothing before an `observe`."""

    def run_checks(self, request: CheckRequest) -> dict[str, tuple[Measurement, float]]:
        """Each cutover check's measurement and seconds; a check that cannot run says why."""

    def switch_alias(self, schema: str, alias: str, to_index: str, from_index: str | None, *,
                     owner: IndexOwner, not_behind: Guard | None = None) -> None:
        """Point the alias at `to_index` atomically if it still points at `from_index`;
        idempotent; records `owner` (the switching view, UID included) as the alias's, and
        never touches an alias or index recorded for another view (core.ownership). With
        `not_behind`, raises SwitchDeferred instead when the candidate's ledger is behind the
        active's, read where the active cannot commit in between."""

    def drop_alias(self, schema: str, alias: str) -> None:
        """Remove the alias (absent: nothing to do)."""

    def drop_index(self, schema: str, index: str, revision: str, *, owner_uid: str) -> None:
        """Remove a revision's index and its ledger entries; refuses the alias's target and
        an index recorded for another view than `owner_uid` (the dropping view's UID)."""

    def close(self) -> None:
        """Release the connection."""


class SinkPools:
    """The operator's connection pools, one per sink kind, made on first use; `size` bounds
    the connections to one database as one role (DV_SINK_POOL_SIZE)."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self._pools: dict[str, Any] = {}
        self._lock = threading.Lock()

    def of(self, kind: str, make: Callable[[int], Any]) -> Any:
        with self._lock:
            if kind not in self._pools:
                self._pools[kind] = make(self.size)
            return self._pools[kind]
