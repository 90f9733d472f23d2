"""A large batch's rows, COPYed by the executors in parallel into a staging table.

Why: through toLocalIterator every row of a batch passes through the driver,
one Python process, while the executors' cores wait.  For a batch worth it
(dvjob.batch_writer decides) the PostgreSQL sink creates an UNLOGGED staging
table, each Spark task COPYs its partition into it from its own connection,
and the driver then merges the staging table into the index together with the
batch's ledger row in ONE transaction (dvjob.sinks.postgres.sink): the index still
changes only in that transaction, so exactly-once holds; staging is scratch.

Rows arrive as COPY text lines Spark built (dvjob.sinks.postgres.copy_text), which the
task only numbers, joins and writes.

A task first deletes what an earlier attempt of the same partition left, so a
retried task does not double its rows.  Ordinals are `partition << 40 | position`:
the order toLocalIterator would give, so the last row of a key still wins.
Each task returns (partition, rows written); the driver checks the staging
table holds exactly that many before merging (a database crash empties an
UNLOGGED table, and a merge of nothing must not be committed as the batch).

This module is pickled by value to the executors, which need not have the
dvjob package: it imports nothing of dvjob.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

CHUNK_LINES = 2000
PART_SHIFT = 40
"""Rows per partition are below 2**40; partitions below 2**23 (ordinals are bigint)."""
PG_SECRET_KEYS = {"host": "host", "port": "port", "database": "dbname", "user": "user",
                  "password": "password", "sslmode": "sslmode"}
"""The PostgreSQL sink Secret's keys and the libpq keywords they are (the operator's own
adapter reads the same keys)."""


def read_secret_dir(directory: str, *, what: str) -> dict[str, str]:
    """A mounted Secret: one file per key.  The kubelet's own entries (`..data`, the
    timestamped directory it swaps atomically) start with dots and are not keys."""
    root = Path(directory)
    try:
        entries = sorted(p for p in root.iterdir() if not p.name.startswith("."))
        return {p.name: p.read_text(encoding="utf-8") for p in entries if p.is_file()}
    except OSError as exc:
        raise ValueError(f"cannot read {what} mounted at {directory}: "
                         f"{exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what} mounted at {directory}: a key is not UTF-8 text "
                         f"({exc.reason})") from None


def libpq_keywords(secret: Mapping[str, str]) -> dict[str, str]:
    """libpq connection keywords from the sink Secret's keys (unknown keys are ignored)."""
    return {PG_SECRET_KEYS[k]: v for k, v in secret.items() if k in PG_SECRET_KEYS and v}


class PartitionCopier:
    """`mapPartitionsWithIndex` function: one partition's COPY text lines (1-tuples) into the
    staging table."""

    def __init__(self, *, schema: str, table: str, columns: Sequence[str], deleted: str,
                 ordinal: str, application_name: str, conninfo: str = "",
                 secret_dir: str = "") -> None:
        self.conninfo = conninfo  # "": libpq's PG* environment, as on the driver
        # Where the executor finds the mounted sink Secret ("": the environment above); the
        # directory travels with the task, never the password.
        self.secret_dir = secret_dir
        self.schema = schema
        self.table = table
        self.columns = list(columns)
        self.deleted = deleted
        self.ordinal = ordinal
        self.application_name = application_name

    def __call__(self, partition: int, lines: Iterable[Sequence[str]]
                 ) -> Iterator[tuple[int, int]]:
        import psycopg
        from psycopg import sql

        target = sql.Identifier(self.schema, self.table)
        copy_sql = sql.SQL("COPY {} ({}) FROM STDIN").format(
            target, sql.SQL(", ").join(sql.Identifier(c) for c in
                                       [*self.columns, self.deleted, self.ordinal]))
        base = partition << PART_SHIFT
        keywords: dict[str, str] = {}
        if self.secret_dir:
            keywords = libpq_keywords(read_secret_dir(self.secret_dir, what="the sink Secret"))
        name = "" if os.environ.get("PGAPPNAME") else self.application_name
        conninfo = psycopg.conninfo.make_conninfo(self.conninfo, application_name=name or None,
                                                  **keywords)
        written = 0
        with psycopg.connect(conninfo) as conn, conn.cursor() as cur:
            cur.execute(sql.SQL("DELETE FROM {} WHERE {} >= %s AND {} < %s").format(
                target, sql.Identifier(self.ordinal), sql.Identifier(self.ordinal)),
                (base, base + (1 << PART_SHIFT)))
            with cur.copy(copy_sql) as copy:
                chunk: list[str] = []
                for line in lines:
                    chunk.append(f"{line[0]}\t{base + written}\n")
                    written += 1
                    if len(chunk) == CHUNK_LINES:
                        copy.write("".join(chunk))
                        chunk.clear()
                if chunk:
                    copy.write("".join(chunk))
        yield partition, written
