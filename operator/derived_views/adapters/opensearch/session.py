"""The OpenSearch sink behind `derived_views.adapters.sink_contract.SinkSession` (docs/sinks.md).

Each revision's index is `<index>__<revision>`; readers search the alias `<index>`, switched
with one `_aliases` request (remove with must_exist, then add), so a concurrent switch
fails the request instead of leaving the alias on two indexes. A switch away from a serving
index blocks that index's writes until the alias has moved, so readers never go back in time
(docs/freshness.md). An index records its view
(namespace/name and UID) and revision in `_meta.derived_views`; the alias's owner is the view
of the index it names (an alias cannot carry metadata of its own), judged as an index's owner
(core.ownership): a switch adds the UID to a name-only record of the index it switches to.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from opensearchpy import NotFoundError, OpenSearch, TransportError
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError

from derived_views.adapters.opensearch import ledger
from derived_views.adapters.opensearch.checks import message_line, run_query_checks
from derived_views.adapters.opensearch.client import OpenSearchClients, OpenSearchCredentials
from derived_views.adapters.sink_contract import (
    AliasConflict,
    SinkPools,
    SinkSecretInvalid,
    SinkUnavailable,
    wait_until_level,
)
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus
from derived_views.core import reasons
from derived_views.core.check_runs import CheckRequest
from derived_views.core.cutover.checks import Measurement
from derived_views.core.cutover.monotonic import Guard, with_in_flight
from derived_views.core.observed import (
    IndexOwner,
    LedgerPosition,
    SinkObserved,
    SwitchBlocker,
    index_tables_to_observe,
    revisions_to_observe,
)
from derived_views.core.ownership import same_view
from derived_views.core.settings import Settings

STALE_HOLD = dt.timedelta(seconds=90)
"""A switch holds the serving index's writes for at most its wait (30 s) and one request."""


class OpenSearchSession:
    """One pass's use of the pooled client of the view's cluster."""

    def __init__(self, client: OpenSearch, ledger_index: str) -> None:
        self.client, self.ledger_index = client, ledger_index
        self._read: tuple[dict[str, LedgerPosition], dict[str, int]] | None = None
        """(heads, oldest batch kept) per revision of the last observe: what prune_ledger cuts."""

    @classmethod
    def open(cls, secret_data: Mapping[str, str], settings: Settings,
             pools: SinkPools) -> OpenSearchSession:
        try:
            creds = OpenSearchCredentials.from_secret_data(secret_data)
        except ValueError as exc:
            raise SinkSecretInvalid(str(exc)) from None
        clients: OpenSearchClients = pools.of("opensearch", OpenSearchClients)
        client = clients.client(creds)
        try:
            client.transport.perform_request("GET", "/")
        except (OpenSearchConnectionError, TransportError) as exc:
            raise SinkUnavailable(f"OpenSearch at {creds.url}: {message_line(exc)}") from None
        return cls(client, settings.sinks.ledger_table)

    def observe(self, spec: DerivedViewSpec, status: DerivedViewStatus, *,
                dropping: bool) -> SinkObserved:
        positions, bad, oldest, running = ledger.read_heads(
            self.client, self.ledger_index, revisions_to_observe(spec, status))
        self._read = (positions, oldest)
        # After the ledger: an index its newest batch names must exist now, unless it was lost.
        found = self._indexes(spec.sink.alias, index_tables_to_observe(spec, status))
        alias = spec.sink.alias
        self._lift_stale_hold(alias)
        target = self._alias_target(alias)
        return SinkObserved(
            indexes=frozenset(found), alias_target=target, ledger=positions,
            alias_owner=self._owner(target) if target else None, bad_records=bad,
            running=running,
            switch_blockers=self._switch_blockers(alias, target, set(found) - {target}),
            index_owners=self._index_owners(found),
            index_oids={name: uuid for name, (uuid, _) in found.items()},
            index_rows={name: rows for name, (_, rows) in found.items()})

    def _indexes(self, base: str, names: Iterable[str]) -> dict[str, tuple[str, int]]:
        """Which of `names` exist: index -> (index.uuid, documents)."""
        wanted = set(names)
        if not wanted:
            return {}
        rows = self.client.transport.perform_request(
            "GET", f"/_cat/indices/{base}__*",
            params={"format": "json", "h": "index,uuid,docs.count",
                    "expand_wildcards": "open,closed"})
        return {r["index"]: (r["uuid"], int(r.get("docs.count") or 0))
                for r in rows if r["index"] in wanted}

    def _alias_target(self, alias: str) -> str | None:
        try:
            found = self.client.transport.perform_request("GET", f"/_alias/{alias}")
        except NotFoundError:
            return None
        targets: list[str] = sorted(found)
        if len(targets) != 1:
            raise RuntimeError(f"alias {alias} names {len(targets)} indexes ({', '.join(targets)}); "
                               "expected one")
        return targets[0]

    def _meta(self, index: str) -> Mapping[str, Any]:
        try:
            found = self.client.transport.perform_request("GET", f"/{index}/_mapping")
        except NotFoundError:
            return {}
        first: dict[str, Any] = next(iter(found.values()), {})
        mappings: dict[str, Any] = first.get("mappings", {})
        meta: Mapping[str, Any] = mappings.get("_meta", {}).get("derived_views", {})
        return meta

    def _index_owners(self, names: Iterable[str]) -> dict[str, IndexOwner]:
        """Each index's owner from `_meta.derived_views` (view `namespace/name`, and `uid`
        since owners are recorded; without it the owner is judged by name)."""
        out: dict[str, IndexOwner] = {}
        for index in sorted(names):
            owner = owner_of(self._meta(index))
            if owner is not None:
                out[index] = owner
        return out

    def _owner(self, index: str) -> IndexOwner | None:
        """The view `index` records (the alias's owner, for the index the alias names)."""
        return owner_of(self._meta(index))

    def _record_uid(self, index: str, owner: IndexOwner) -> None:
        """Add the switching view's UID to an index (the alias's owner-to-be) that records
        only its name (from before UIDs were): from now on it is judged by UID. `_meta` is
        replaced whole by a mapping update, so the rest of it is written back as it was."""
        found = self.client.transport.perform_request("GET", f"/{index}/_mapping")
        first: dict[str, Any] = next(iter(found.values()), {})
        meta: dict[str, Any] = dict(first.get("mappings", {}).get("_meta", {}))
        recorded = dict(meta.get("derived_views", {}))
        if recorded.get("uid"):
            return
        meta["derived_views"] = {**recorded, "uid": owner.uid}
        self.client.transport.perform_request("PUT", f"/{index}/_mapping",
                                              body={"_meta": meta})

    def _switch_blockers(self, alias: str, target: str | None, indexes: Iterable[str]
                         ) -> dict[str, SwitchBlocker]:
        """An index (not an alias) named like the alias blocks every switch."""
        if target is not None or not indexes:
            return {}
        if not self.client.indices.exists(index=alias):
            return {}
        blocker = SwitchBlocker(reasons.ALIAS_NAME_TAKEN, f"an index named {alias} exists: readers "
                                "search the alias of that name, so move or delete that index")
        return {index: blocker for index in indexes}

    def prune_ledger(self) -> int:
        if self._read is None:
            return 0
        positions, oldest = self._read
        return ledger.prune(self.client, self.ledger_index, positions, oldest)

    def run_checks(self, request: CheckRequest) -> dict[str, tuple[Measurement, float]]:
        return run_query_checks(self.client, request, self.ledger_index)

    def switch_alias(self, schema: str, alias: str, to_index: str, from_index: str | None, *,
                     owner: IndexOwner, not_behind: Guard | None = None) -> None:
        if not owner.uid:  # recorded without one, the alias would go to any view of its name
            raise ValueError(f"switching alias {alias} needs its view's uid")
        current = self._alias_target(alias)
        claimed = self._owner(current) if current else None
        if claimed is not None and not same_view(claimed, owner):
            raise AliasConflict(f"alias {alias} belongs to {claimed.describe()}, not to "
                                f"{owner.describe()}")
        recorded = self._owner(to_index)
        if recorded is not None and not same_view(recorded, owner):
            raise AliasConflict(f"index {to_index} belongs to {recorded.describe()}, not to "
                                f"{owner.describe()}")
        if current not in (from_index, to_index):
            raise AliasConflict(f"alias {alias} points at {current!r}, expected {from_index!r}")
        if recorded is not None and not recorded.uid:
            self._record_uid(to_index, owner)
        if current == to_index:
            return
        actions: list[dict[str, Any]] = []
        if from_index is not None:
            actions.append({"remove": {"index": from_index, "alias": alias, "must_exist": True}})
        actions.append({"add": {"index": to_index, "alias": alias}})
        if not_behind is None or current is None:
            self.client.transport.perform_request("POST", "/_aliases", body={"actions": actions})
            return
        guard = not_behind
        wait_until_level(guard, lambda: self._heads(guard.active, guard.candidate), held=False)
        with self._writes_held(alias, current):
            self._wait_until_held_level(guard)
            self.client.transport.perform_request("POST", "/_aliases", body={"actions": actions})

    @contextlib.contextmanager
    def _writes_held(self, alias: str, index: str) -> Iterator[None]:
        """Block writes to the serving index for the switch (readers go on; the serving job
        re-sends what the block refused once it is lifted): OpenSearch's stand-in for the
        lock PostgreSQL's switch takes. Recorded first, so a crash leaves it to be lifted."""
        ledger.record_hold(self.client, self.ledger_index, alias, index)
        try:
            # Returns once writes already in flight on the index have finished.
            self.client.transport.perform_request("PUT", f"/{index}/_block/write")
            yield
        finally:
            self._lift_hold(alias, index)

    def _lift_hold(self, alias: str, index: str) -> None:
        with contextlib.suppress(NotFoundError):
            self.client.transport.perform_request(
                "PUT", f"/{index}/_settings", body={"index.blocks.write": None})
        ledger.forget_hold(self.client, self.ledger_index, alias)

    def _lift_stale_hold(self, alias: str) -> None:
        """A hold older than any switch lasts was left by an operator that died holding it."""
        with contextlib.suppress(NotFoundError):  # no ledger index yet
            held = ledger.hold_of(self.client, self.ledger_index, alias)
            if held is not None and dt.datetime.now(dt.UTC) - held[1] > STALE_HOLD:
                self._lift_hold(alias, held[0])

    def _heads(self, *revisions: str) -> dict[str, LedgerPosition]:
        return ledger.read_heads(self.client, self.ledger_index, revisions).positions

    def _wait_until_held_level(self, guard: Guard) -> None:
        """Wait for the candidate's ledger to reach how far readers may have seen the held
        serving index: read once, with the block in place, its ledger's head raised to its
        in-flight batch (whose rows may be partly searchable: the index refreshes on its
        own). No more of the serving job's rows can become visible meanwhile."""
        reached = with_in_flight(self._heads(guard.active).get(guard.active),
                                 ledger.in_flight(self.client, self.ledger_index, guard.active))
        level = {guard.active: reached} if reached is not None else {}
        wait_until_level(guard, lambda: {**self._heads(guard.candidate), **level}, held=True)

    def drop_alias(self, schema: str, alias: str) -> None:
        target = self._alias_target(alias)
        if target is None:
            return
        with contextlib.suppress(NotFoundError):
            self.client.transport.perform_request("DELETE", f"/{target}/_alias/{alias}")

    def drop_index(self, schema: str, index: str, revision: str, *, owner_uid: str) -> None:
        if self._alias_target(index.rsplit("__", 1)[0]) == index:
            raise RuntimeError(f"index {index} is the alias's target; not dropping")
        recorded = owner_of(self._meta(index))
        if recorded is not None and recorded.uid and recorded.uid != owner_uid:
            raise RuntimeError(f"index {index} belongs to {recorded.describe()}, not to the "
                               f"view with uid {owner_uid or '(none given)'}; not dropping it "
                               "or its ledger documents")
        with contextlib.suppress(NotFoundError):
            self.client.transport.perform_request("DELETE", f"/{index}")
        ledger.drop_revision(self.client, self.ledger_index, revision)

    def close(self) -> None:
        """Nothing to give back: the client stays in the pool for the next pass."""


def owner_of(meta: Mapping[str, Any]) -> IndexOwner | None:
    """`_meta.derived_views` as an owner: `view` is `namespace/name`; `uid` may be absent
    (an index from before UIDs were recorded)."""
    view, uid = meta.get("view"), meta.get("uid")
    if not isinstance(view, str) or view.count("/") != 1 or not all(view.split("/")):
        return None
    namespace, name = view.split("/")
    return IndexOwner(namespace, name, uid if isinstance(uid, str) else "")
