"""The PostgreSQL sink behind `derived_views.adapters.sink_contract.SinkSession`.

The statements live in `postgres_sink` (ledger, alias, drops), `postgres_checks`
and `postgres_bad_records`; this class binds them to one autocommit connection
for one pass (taken from and given back to `postgres_pool`) and to the view's spec.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from derived_views.adapters.postgres import sink as pg
from derived_views.adapters.postgres.bad_records import bad_record_counts
from derived_views.adapters.postgres.checks import run_sql_checks
from derived_views.adapters.postgres.pool import PgPool
from derived_views.adapters.postgres.progress import running_batches
from derived_views.adapters.sink_contract import SinkPools, SinkSecretInvalid
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus
from derived_views.core.check_runs import CheckRequest
from derived_views.core.cutover.checks import Measurement
from derived_views.core.cutover.monotonic import Guard
from derived_views.core.observed import (
    IndexOwner,
    SinkObserved,
    index_tables_to_observe,
    revisions_to_observe,
)
from derived_views.core.settings import Settings


class PostgresSession:
    """Indexes are tables `<table>__<revision>` in the schema; the alias is a VIEW."""

    def __init__(self, conn: Any, ledger_table: str, check_role: str | None,
                 release: Callable[[], None]) -> None:
        self.conn, self.ledger_table, self.check_role = conn, ledger_table, check_role
        self._release = release
        self._read: tuple[str, list[str]] | None = None
        """(schema, revisions with a ledger head) of the last observe: what prune_ledger cuts."""

    @classmethod
    def open(cls, secret_data: Mapping[str, str], settings: Settings,
             pools: SinkPools) -> PostgresSession:
        try:
            creds = pg.PgConnection.from_secret_data(secret_data)
        except ValueError as exc:
            raise SinkSecretInvalid(str(exc)) from None
        pool: PgPool = pools.of("postgres", PgPool)
        conn = pool.acquire(creds, lambda: creds.connect(autocommit=True))
        return cls(conn, settings.sinks.ledger_table, creds.check_role,
                   release=lambda: pool.release(creds, conn))

    def observe(self, spec: DerivedViewSpec, status: DerivedViewStatus, *,
                dropping: bool) -> SinkObserved:
        conn, schema, ledger_table = self.conn, spec.sink.db_schema, self.ledger_table
        tables = index_tables_to_observe(spec, status)
        indexes = pg.existing_tables(conn, schema, tables)
        ledger = pg.ledger_positions(conn, schema, revisions_to_observe(spec, status),
                                     ledger=ledger_table)
        self._read = (schema, sorted(ledger))
        # After the ledger: a table its newest row names must exist now, unless it was lost.
        oids = pg.table_oids(conn, schema, tables)
        alias = spec.sink.alias
        target = pg.alias_target(conn, schema, alias)
        return SinkObserved(
            indexes=frozenset(indexes), alias_target=target,
            ledger=ledger, alias_owner=pg.alias_owner(conn, schema, alias),
            bad_records=bad_record_counts(conn, schema, ledger, ledger=ledger_table),
            running=running_batches(conn, schema, revisions_to_observe(spec, status),
                                    ledger=ledger_table),
            switch_blockers=pg.switch_blockers(conn, schema, alias, set(indexes) - {target}),
            drop_blockers=(pg.drop_blockers(conn, schema, alias, indexes) if dropping else ()),
            index_owners=pg.index_owners(conn, schema, indexes),
            index_oids=oids, index_rows=dict(indexes))

    def prune_ledger(self) -> int:
        if self._read is None:
            return 0
        schema, revisions = self._read
        return pg.prune_ledger(self.conn, schema, revisions, ledger=self.ledger_table)

    def run_checks(self, request: CheckRequest) -> dict[str, tuple[Measurement, float]]:
        return run_sql_checks(self.conn, request, self.check_role, self.ledger_table)

    def switch_alias(self, schema: str, alias: str, to_index: str, from_index: str | None, *,
                     owner: IndexOwner, not_behind: Guard | None = None) -> None:
        pg.switch_alias(self.conn, schema, alias, to_index, from_index, owner=owner,
                        not_behind=not_behind, ledger=self.ledger_table)

    def drop_alias(self, schema: str, alias: str) -> None:
        pg.drop_alias(self.conn, schema, alias)

    def drop_index(self, schema: str, index: str, revision: str, *, owner_uid: str) -> None:
        pg.drop_index(self.conn, schema, index, revision, ledger=self.ledger_table,
                      owner_uid=owner_uid)

    def close(self) -> None:
        self._release()
