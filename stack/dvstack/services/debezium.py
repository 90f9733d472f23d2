"""A "system of record" for change data capture: a database, its Debezium connector, a workload.

A legacy application's database on the stack's PostgreSQL (one database per run), an
`accounts` table seeded with rows, a Debezium PostgreSQL connector registered with the
stack's Kafka Connect (pgoutput, a publication and a slot of its own), and a workload of
inserts, updates and deletes. Two views over its topic (a mirror, and a v2 with derived
columns) and their expected rows computed in Python from the table itself, the truth the
index is compared with. The CDC e2e test and `make demo-cdc` share it.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from dvstack.services import kafka_connect
from dvstack.testing.traffic import Background
from dvstack.testing.waiting import wait_for

TABLE = "accounts"
ROW_SCHEMA = "id INT, owner STRING, region STRING, balance BIGINT"
"""`source.schema` of a view over the table's topic: the table's row, in Spark DDL."""
REGIONS = ("north", "south", "east", "west")
AVRO_ROW_SCHEMA = ('{"type": "record", "name": "Account", "fields": ['
                   '{"name": "id", "type": "int"}, {"name": "owner", "type": "string"}, '
                   '{"name": "region", "type": "string"}, {"name": "balance", "type": "long"}]}')
"""`source.avro.readerSchema` of a view over the table's topic written by Debezium's Avro
converter: the table's row (NOT NULL columns, so no unions)."""
MIRROR_SQL = "SELECT id, owner, region, balance, _debezium_deleted AS _dv_deleted FROM events"
MIRROR_COLUMNS = ["owner", "region", "balance"]
V2_SQL = ("SELECT id, owner, upper(region) AS region, balance, balance >= 5000 AS vip, "
          "_debezium_deleted AS _dv_deleted FROM events")
V2_COLUMNS = ["owner", "region", "balance", "vip"]

Rows = dict[int, tuple[Any, ...]]


def mirrored(table: Rows) -> Rows:
    """What MIRROR_SQL's index holds for the table: the table."""
    return dict(table)


def v2_of(table: Rows) -> Rows:
    """What V2_SQL's index holds for the table, in Python: the region upper-cased, vip when
    the balance is 5,000 or more."""
    return {k: (owner, region.upper(), balance, balance >= 5000)
            for k, (owner, region, balance) in table.items()}


def index_rows(dsn: str, table: str, columns: list[str]) -> Rows:
    """The alias `table` now: id -> the columns."""
    cols = ", ".join(f'"{c}"' for c in columns)
    with psycopg.connect(dsn) as conn:
        return {r[0]: tuple(r[1:]) for r in conn.execute(
            f'SELECT id, {cols} FROM "{table}"').fetchall()}


def differing(index: Rows, truth: Rows) -> int:
    """Rows present on one side only, or present on both with other values."""
    return sum(index.get(k) != truth.get(k) for k in index.keys() | truth.keys())


@dataclass(frozen=True)
class SourceDatabase:
    """One run's system of record and what captures it."""

    key: str
    admin_dsn: str
    pg: dict[str, Any]
    connect_url: str
    capture_name: str = ""
    """Tells apart connectors capturing the same database (`second_capture`)."""

    @property
    def database(self) -> str:
        return f"sor_{self.key}"

    @property
    def dsn(self) -> str:
        return make_conninfo(self.admin_dsn, dbname=self.database)

    @property
    def connector(self) -> str:
        return f"sor-{self.key}{self.capture_name and '-' + self.capture_name}"

    @property
    def slot(self) -> str:
        return f"dv_{self.key}{self.capture_name and '_' + self.capture_name}"

    @property
    def topic(self) -> str:
        """Debezium's topic for the table: <topic.prefix>.<schema>.<table>."""
        return f"{self.topic_prefix}.public.{TABLE}"

    @property
    def topic_prefix(self) -> str:
        return f"cdc_{self.key}{self.capture_name and '_' + self.capture_name}"

    def second_capture(self, name: str) -> SourceDatabase:
        """Another connector (slot, publication, topic) on the same database, e.g. one
        writing Avro beside one writing JSON; `drop(database=False)` removes it alone."""
        return replace(self, capture_name=name)

    def create(self, seed_rows: int, seed: int = 11) -> None:
        """The database and its table with `seed_rows` rows (Debezium's snapshot reads them)."""
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.database}"')
        rnd = random.Random(seed)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {TABLE} (id integer PRIMARY KEY, owner text NOT NULL, "
                         "region text NOT NULL, balance bigint NOT NULL)")
            with conn.cursor() as cur:
                cur.executemany(f"INSERT INTO {TABLE} VALUES (%s, %s, %s, %s)", [
                    (i, f"owner-{i}", rnd.choice(REGIONS), rnd.randrange(0, 10_000))
                    for i in range(1, seed_rows + 1)])

    def capture(self, timeout: float = 120, avro_registry_url: str | None = None) -> None:
        """Register the Debezium connector and wait until its task streams. With
        `avro_registry_url` (the stack's `schema_registry_url`) keys and values are Avro in
        Confluent's wire format, their schemas registered there (`capture_config`)."""
        kafka_connect.put_connector(self.connect_url, self.connector,
                                    self.capture_config(avro_registry_url))
        task = wait_for(self._settled_task, timeout=timeout, interval=1,
                        what=f"connector {self.connector} and its task to run")
        if task.get("state") == "FAILED":  # it stays failed: no point waiting longer
            raise RuntimeError(f"connector {self.connector}'s task failed: "
                               f"{str(task.get('trace', ''))[:3000]}")

    def capture_config(self, avro_registry_url: str | None = None) -> dict[str, str]:
        """The Debezium connector's configuration: the worker's JSON converter, or Avro
        through the registry at `avro_registry_url`. Avro names allow letters, digits and
        `_` only, so Debezium then adjusts the schema and field names it derives from
        tables and columns (`avro` mode) rather than have the registry refuse them."""
        config = {
            "connector.class": kafka_connect.POSTGRES_CONNECTOR,
            "tasks.max": "1",
            "plugin.name": "pgoutput",
            "database.hostname": str(self.pg["host"]), "database.port": str(self.pg["port"]),
            "database.user": str(self.pg["user"]), "database.password": str(self.pg["password"]),
            "database.dbname": self.database,
            "topic.prefix": self.topic_prefix,
            "table.include.list": f"public.{TABLE}",
            "slot.name": self.slot, "publication.name": self.slot,
            "publication.autocreate.mode": "filtered",
            # A stopped connector drops its slot, which would otherwise hold WAL for ever.
            "slot.drop.on.stop": "true",
            # The broker does not auto-create topics: Connect creates them (KIP-158).
            "topic.creation.default.replication.factor": "1",
            "topic.creation.default.partitions": "3",
        }
        if avro_registry_url is not None:
            config.update(kafka_connect.avro_converter_config(avro_registry_url))
            config["schema.name.adjustment.mode"] = "avro"
            config["field.name.adjustment.mode"] = "avro"
        return config

    def _settled_task(self) -> dict[str, Any] | None:
        """The task once it runs (with its connector) or has failed; None while it starts."""
        status = kafka_connect.connector_status(self.connect_url, self.connector)
        tasks = (status or {}).get("tasks") or []
        failed = [t for t in tasks if t.get("state") == "FAILED"]
        if failed:
            return dict(failed[0])
        running = [t for t in tasks if t.get("state") == "RUNNING"]
        if status is not None and status["connector"]["state"] == "RUNNING" and running:
            return dict(running[0])
        return None

    def rows(self) -> Rows:
        """The table now: id -> (owner, region, balance)."""
        with psycopg.connect(self.dsn) as conn:
            return {r[0]: tuple(r[1:]) for r in conn.execute(
                f"SELECT id, owner, region, balance FROM {TABLE}").fetchall()}

    def drop(self, database: bool = True) -> None:
        """Remove the connector, its slot if it is left behind, and (`database`) the
        database."""
        kafka_connect.delete_connector(self.connect_url, self.connector)
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            def slot_gone() -> bool:
                row = conn.execute("SELECT active FROM pg_replication_slots "
                                   "WHERE slot_name = %s", (self.slot,)).fetchone()
                if row is None:
                    return True
                if not row[0]:
                    conn.execute("SELECT pg_drop_replication_slot(%s)", (self.slot,))
                return False
            wait_for(slot_gone, timeout=60, interval=0.5,
                     what=f"replication slot {self.slot} to go")
            if database:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')


@dataclass
class TableWorkload(Background):
    """Random inserts (40 %), updates (40 %) and deletes (20 %) on the table, one transaction
    each, paced at `rate` per second (pacing, not synchronisation). `stop` lets the change in
    flight finish; `start` resumes."""

    dsn: str
    rate: float
    seed: int = 7
    counts: dict[str, int] = field(default_factory=lambda: {"insert": 0, "update": 0,
                                                            "delete": 0})
    failures: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def changes(self) -> int:
        return sum(self.counts.values())

    def _run(self) -> None:
        rnd = random.Random(self.seed + self.changes)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            top = conn.execute(f"SELECT coalesce(max(id), 0) FROM {TABLE}").fetchone()
            next_id = 1 + int(top[0] if top else 0)
            started, done = time.monotonic(), 0
            while not self._stop.is_set():
                try:
                    next_id = self._change(conn, rnd, next_id)
                except psycopg.Error as exc:
                    self.failures.append(repr(exc))
                done += 1
                ahead = started + done / self.rate - time.monotonic()
                if ahead > 0:
                    self._stop.wait(ahead)

    def _change(self, conn: psycopg.Connection[Any], rnd: random.Random, next_id: int) -> int:
        ids = [r[0] for r in conn.execute(
            f"SELECT id FROM {TABLE} ORDER BY random() LIMIT 20").fetchall()]
        roll = rnd.random()
        if roll < 0.4 or not ids:
            conn.execute(f"INSERT INTO {TABLE} VALUES (%s, %s, %s, %s)", (
                next_id, f"owner-{next_id}", rnd.choice(REGIONS), rnd.randrange(0, 10_000)))
            self.counts["insert"] += 1
            return next_id + 1
        if roll < 0.8:
            conn.execute(f"UPDATE {TABLE} SET balance = %s, region = %s WHERE id = %s",
                         (rnd.randrange(0, 10_000), rnd.choice(REGIONS), rnd.choice(ids)))
            self.counts["update"] += 1
        else:
            conn.execute(f"DELETE FROM {TABLE} WHERE id = %s", (rnd.choice(ids),))
            self.counts["delete"] += 1
        return next_id


def settle(workload: TableWorkload, source: SourceDatabase, dsn: str, table: str,
           columns: list[str], expected_of: Callable[[Rows], Rows], *,
           timeout: float = 180) -> dict[str, Any]:
    """Pause the workload, wait until the index equals what `expected_of` makes of the table,
    and resume it: while changes keep coming the index trails the database by the pipeline's
    latency, so only a paused table gives one state to compare with. The comparison's
    figures; TimedOut (with the count of differing rows) if the index never gets there."""
    workload.stop()
    truth = expected_of(source.rows())
    started = time.monotonic()
    wait_for(lambda: differing(index_rows(dsn, table, columns), truth) == 0, timeout=timeout,
             interval=1, what=f"the index {table} to equal the source table ({len(truth)} rows)",
             on_timeout=lambda: f"{differing(index_rows(dsn, table, columns), truth)} rows differ")
    figures = {"rows": len(truth),
               "differing_rows": differing(index_rows(dsn, table, columns), truth),
               "seconds_to_equal_after_pause": round(time.monotonic() - started, 1),
               "changes": workload.changes, "operations": dict(workload.counts)}
    workload.start()
    return figures
