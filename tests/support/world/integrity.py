"""core_world's World with table identities: what the job's ledger records and checks.

Each index table gets a fresh OID when created; each committed batch records the OID
of the table it went to.  Like the real job (dvjob.integrity), a job refuses to start
or to write a batch when its ledger names batches the table no longer holds.  The
world also knows which tables hold every batch from offset 0 ("complete"), so a test
can assert that the alias never selects from any other.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from derived_views.core import actions as A
from derived_views.core.observed import LedgerPosition, Observed, SinkObserved
from support.world.world import App, World


@dataclass
class IntegrityWorld(World):
    oids: dict[str, int] = field(default_factory=dict)
    """Table -> OID of the table now under that name."""
    ledger_oids: dict[str, int] = field(default_factory=dict)
    """Revision -> OID its newest batch was written to."""
    complete: set[int] = field(default_factory=set)
    """OIDs of tables that hold every batch of their revision's ledger."""
    serving_incomplete: list[str] = field(default_factory=list)
    next_oid: Any = field(default_factory=lambda: itertools.count(16384))

    def create_table(self, table: str, *, complete: bool) -> None:
        self.tables.add(table)
        self.oids[table] = next(self.next_oid)
        if complete:
            self.complete.add(self.oids[table])

    def drop_table_by_hand(self, table: str, *, cascade_alias: bool = False) -> None:
        """DROP TABLE from psql; the ledger keeps its rows. CASCADE drops the alias view too."""
        self.tables.discard(table)
        self.oids.pop(table, None)
        if cascade_alias and self.alias == table:
            self.alias = None

    def recreate_table_by_hand(self, table: str) -> None:
        self.drop_table_by_hand(table)
        self.create_table(table, complete=False)

    def _lost(self, revision: str, table: str) -> bool:
        return revision in self.ledger and self.ledger_oids.get(revision) != self.oids.get(table)

    def start_job(self, app: App) -> None:
        revision, table = app.config["revision"], app.config["sink"]["table"]
        if self._lost(revision, table):
            app.state, app.error = "FAILED", f"IndexLostError: index table {table} is missing"
            return
        fresh = table not in self.tables
        super().start_job(app)
        if app.started and fresh:
            self.tables.discard(table)
            self.create_table(table, complete=revision not in self.ledger)

    def run_batch(self, app: App) -> None:
        revision, table = app.config["revision"], app.config["sink"]["table"]
        if self._lost(revision, table):
            app.state, app.error = "FAILED", f"IndexLostError: index table {table} was lost"
            return
        super().run_batch(app)
        if revision in self.ledger:
            self.ledger_oids[revision] = self.oids[table]

    def observe(self) -> Observed:
        seen = super().observe()
        if seen.sink is None:
            return seen
        sink = SinkObserved(
            indexes=seen.sink.indexes, alias_target=seen.sink.alias_target,
            ledger={rev: LedgerPosition(p.end_offsets, p.committed_at, p.batch_id, p.earlier,
                                        index_oid=self.ledger_oids.get(rev))
                    for rev, p in seen.sink.ledger.items()},
            alias_owner=seen.sink.alias_owner,
            index_oids={t: o for t, o in self.oids.items() if t in seen.sink.indexes})
        return Observed(view=seen.view, status=seen.status, settings=seen.settings,
                        spark_applications=seen.spark_applications, sink=sink,
                        end_offsets=seen.end_offsets, missing_topics=seen.missing_topics,
                        sink_problem=seen.sink_problem, secret_labels=seen.secret_labels,
                        driver_pods=seen.driver_pods)

    def apply(self, action: A.Action) -> None:
        match action:
            case A.DropIndex(index=index, revision=revision):
                super().apply(action)  # refuses the alias's target
                # the adapter drops the table if any AND the revision's ledger rows
                self.oids.pop(index, None)
                self.ledger.pop(revision, None)
                self.ledger_history.pop(revision, None)
                self.ledger_oids.pop(revision, None)
            case A.SwitchAlias(to_index=to):
                super().apply(action)
                if self.oids.get(to) not in self.complete:
                    self.serving_incomplete.append(f"{to} at {self.now.isoformat()}")
            case _:
                super().apply(action)
