"""A large batch's rows, COPYed by the executors in parallel into a staging table.

Why: through toLocalIterator every row of a batch passes through the driver,
one Python process, while the executors' cores wait.  For a batch worth it
(dvjob.batch_writer decides) the PostgreSQL sink creates an UNLOGGED staging
table, each Spark task COPYs its partition into it from its own connection,
and the driver then merges the staging table into the index together with the
batch's ledger row in ONE transaction (dvjob.sink_postgres): the index still
changes only in that transaction, so exactly-once holds; staging is scratch.

Rows arrive as COPY text lines Spark built (dvjob.pg_copy_text), which the
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
from collections.abc import Iterable, Iterator, Sequence

CHUNK_LINES = 2000
PART_SHIFT = 40
"""Rows per partition are below 2**40; partitions below 2**23 (ordinals are bigint)."""


class PartitionCopier:
    """`mapPartitionsWithIndex` function: one partition's COPY text lines (1-tuples) into the
    staging table."""

    def __init__(self, *, schema: str, table: str, columns: Sequence[str], deleted: str,
                 ordinal: str, application_name: str, conninfo: str = "") -> None:
        self.conninfo = conninfo  # "": libpq's PG* environment, as on the driver
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
        # The operator maps the sink Secret into the driver's and the executors' environment.
        name = "" if os.environ.get("PGAPPNAME") else self.application_name
        conninfo = psycopg.conninfo.make_conninfo(self.conninfo, application_name=name or None)
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
