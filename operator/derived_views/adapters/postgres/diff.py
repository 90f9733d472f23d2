"""Measure the diff check on PostgreSQL: the candidate's index against the active's, row by
row or by hashed key ranges first (core.cutover.diff decides which, and judges).

Runs inside a check's transaction (adapters.postgres.checks: read-only, one REPEATABLE READ
snapshot of both indexes, settings pinned, the check role), its statements sharing the
check's deadline. The columns are read from the catalog and intersected with the spec's in
core.cutover.diff; every identifier reaches the server through psycopg.sql, never as text
of the spec. Values are compared by their text form (each type's output function, under the
pinned settings), so the row-by-row and the hashed comparison agree on what differs: a
value that reads the same is the same, 1.0 and 1.00 are not.

Under live traffic the two jobs stand at different offsets: keys written by a batch past the
position both have reached (core.cutover.diff.in_flight_batches) are left out of both sides.
A batch's rows and its ledger row are written by one transaction, so such rows are those
whose `xmin` is one of those ledger rows' (read in the same snapshot, as the operator's own
user: the check role reads the indexes alone). A key deleted past that position is not seen
and counts as a row in one index only.

Row by row: one FULL OUTER JOIN USING (the primary key), the rows that differ kept
(MATERIALIZED: only those, keys and flags) and counted, a few keys of each kind taken in key
order. Hashed: each index is read once into one count and one sum of row hashes per key range
(`hashtextextended` of the key's text, masked); only rows in ranges whose count or sum differ
are joined as above. Equal sums of different rows (a 64-bit collision) would hide a range.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
from psycopg import sql

from derived_views.core.check_runs import EXAMPLES, CheckRequest
from derived_views.core.cutover.diff import (
    ColumnChanges,
    ColumnsRefused,
    DiffFound,
    Mode,
    diff_columns,
    in_flight_batches,
    mode_for,
    ranges_for,
)
from derived_views.core.naming import LEDGER_TABLE

PRESENT_C, PRESENT_A = "_dv_in_candidate", "_dv_in_active"
"""Marks of a joined row's sides (the `_dv_` prefix is never a compared column's)."""


def timeout_until(conn: psycopg.Connection[Any], deadline: float) -> None:
    """The statement timeout cut to what is left of the check's: its statements share it."""
    left_ms = max(1, int((deadline - time.monotonic()) * 1000))
    conn.execute(sql.SQL("SET LOCAL statement_timeout = {}").format(sql.Literal(left_ms)))


def table_columns(conn: psycopg.Connection[Any], schema: str, table: str) -> tuple[str, ...]:
    """The table's columns in order, from the catalog (empty: no such table)."""
    rows = conn.execute(
        "SELECT a.attname FROM pg_catalog.pg_attribute a "
        "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attnum", (schema, table)).fetchall()
    return tuple(str(r[0]) for r in rows)


def in_flight_xids(conn: psycopg.Connection[Any], request: CheckRequest, ledger: str,
                   role: str | None) -> tuple[list[str], list[str]]:
    """The transaction ids of each index's batches past the position both have reached,
    from the ledger in the check's snapshot (read as the session's user, then the check role
    again: it need not read the ledger)."""
    if request.active_revision is None:
        return [], []
    if role:
        conn.execute("SET LOCAL ROLE NONE")
    try:
        if conn.execute("SELECT to_regclass(%s)",
                        (sql.Identifier(request.schema, ledger).as_string(conn),)
                        ).fetchone() in (None, (None,)):
            return [], []
        rows = conn.execute(sql.SQL(
            "SELECT revision, batch_id, end_offsets, xmin::text FROM {} "
            "WHERE revision = ANY(%s)").format(sql.Identifier(request.schema, ledger)),
            ([request.revision, request.active_revision],)).fetchall()
    finally:
        if role:
            conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
    batches: dict[str, dict[int, Any]] = {request.revision: {}, request.active_revision: {}}
    xids: dict[tuple[str, int], str] = {}
    for revision, batch, ends, xid in rows:
        batches[str(revision)][int(batch)] = ends
        xids[(str(revision), int(batch))] = str(xid)
    late_c, late_a = in_flight_batches(batches[request.revision],
                                       batches[request.active_revision])
    return ([xids[(request.revision, b)] for b in sorted(late_c)],
            [xids[(request.active_revision, b)] for b in sorted(late_a)])


def diff_tables(conn: psycopg.Connection[Any], request: CheckRequest, deadline: float,
                ledger: str = LEDGER_TABLE, role: str | None = None) -> DiffFound | str:
    """The diff of the request's candidate and active index, or why it cannot be run."""
    check = request.checks.diff
    assert check is not None and request.active_index is not None
    schema, key = request.schema, request.primary_key
    timeout_until(conn, deadline)
    late = in_flight_xids(conn, request, ledger, role)
    found_c = table_columns(conn, schema, request.index)
    found_a = table_columns(conn, schema, request.active_index)
    for table, found in ((request.index, found_c), (request.active_index, found_a)):
        if not found:
            return f"index {schema}.{table} not found"
        if missing := [k for k in key if k not in found]:
            return f"index {schema}.{table} has no primary-key column {', '.join(missing)}"
    try:
        columns = diff_columns(found_c, found_a, key, check)
    except ColumnsRefused as exc:
        return str(exc)
    cand = sql.Identifier(schema, request.index)
    active = sql.Identifier(schema, request.active_index)
    timeout_until(conn, deadline)
    counted = conn.execute(sql.SQL("SELECT (SELECT count(*) FROM {}), (SELECT count(*) FROM {})")
                           .format(cand, active)).fetchone()
    assert counted is not None
    rows_c, rows_a = int(counted[0]), int(counted[1])
    mode = mode_for(max(rows_c, rows_a), check)
    ranges = ranges_for(max(rows_c, rows_a)) if mode is Mode.HASHED else 0
    timeout_until(conn, deadline)
    row = conn.execute(_query(cand, active, key, columns.compared, ranges, late)).fetchone()
    assert row is not None
    n = len(columns.compared)
    only_c, only_a, changed = int(row[0]), int(row[1]), int(row[2])
    per_column = tuple(ColumnChanges(c, int(row[3 + i]), tuple(row[6 + n + i] or ()))
                       for i, c in enumerate(columns.compared))
    return DiffFound(
        mode=mode, candidate_rows=rows_c, active_rows=rows_a, only_candidate=only_c,
        only_active=only_a, changed=changed, columns=per_column,
        only_candidate_examples=tuple(row[3 + n] or ()),
        only_active_examples=tuple(row[4 + n] or ()),
        changed_examples=tuple(row[5 + n] or ()), not_compared=columns.not_compared,
        ranges=ranges, differing_ranges=int(row[7 + 2 * n]) if ranges else 0,
        compared=rows_c + rows_a, in_flight=int(row[6 + 2 * n]))


def _text(value: sql.Composable) -> sql.Composed:
    """A value as its type's output function writes it, NULL kept apart from ''."""
    return sql.SQL("CASE WHEN {v} IS NULL THEN NULL ELSE pg_catalog.format('%s', {v}) END"
                   ).format(v=value)


def _key_text(key: tuple[str, ...]) -> sql.Composable:
    parts = [sql.SQL("pg_catalog.format('%s', {})").format(sql.Identifier(k)) for k in key]
    if len(parts) == 1:
        return parts[0]
    return sql.SQL("pg_catalog.concat_ws(',', {})").format(sql.SQL(", ").join(parts))


def _side(table: sql.Identifier, mark: str, key: tuple[str, ...], compared: tuple[str, ...],
          where: sql.Composable) -> sql.Composed:
    """One index as the join reads it: the key as stored, the compared columns as text."""
    fields: list[sql.Composable] = [sql.SQL("true AS {}").format(sql.Identifier(mark))]
    fields += [sql.Identifier(k) for k in key]
    fields += [sql.SQL("{} AS {}").format(_text(sql.Identifier(c)), sql.Identifier(c))
               for c in compared]
    return sql.SQL("SELECT {} FROM {}{}").format(sql.SQL(", ").join(fields), table, where)


def _bucket(key: tuple[str, ...], ranges: int) -> sql.Composed:
    return sql.SQL("(pg_catalog.hashtextextended({}, 0) & {})").format(
        _key_text(key), sql.Literal(ranges - 1))


def _ranges(table: sql.Identifier, key: tuple[str, ...], compared: tuple[str, ...],
            ranges: int) -> sql.Composed:
    """Per key range of one index: its rows and the sum of their rows' hashes."""
    row = sql.SQL(", ").join([_key_text(key), *(_text(sql.Identifier(c)) for c in compared)])
    return sql.SQL("SELECT {bucket} AS b, count(*) AS n, "
                   "sum(pg_catalog.hashtextextended(pg_catalog.format('%s', ROW({row})), 0)) "
                   "AS s FROM {table} GROUP BY 1").format(bucket=_bucket(key, ranges), row=row,
                                                          table=table)


def _xids(xids: list[str]) -> sql.Composed:
    return sql.SQL("{}::pg_catalog.xid[]").format(sql.Literal("{" + ",".join(xids) + "}"))


def _settled(cand: sql.Identifier, active: sql.Identifier, key: tuple[str, ...],
             late: tuple[list[str], list[str]]) -> list[sql.Composable]:
    """The CTEs `inflight` (keys either index wrote past the common position), `cs` and `as_`
    (each index without them), which the comparison reads instead of the tables."""
    keys = sql.SQL(", ").join(sql.Identifier(k) for k in key)
    match = sql.SQL(" AND ").join(sql.SQL("i.{k} = t.{k}").format(k=sql.Identifier(k))
                                  for k in key)

    def kept(table: sql.Identifier) -> sql.Composed:
        return sql.SQL("SELECT * FROM {} t WHERE NOT EXISTS (SELECT 1 FROM inflight i WHERE {})"
                       ).format(table, match)

    return [sql.SQL("inflight AS MATERIALIZED (SELECT {keys} FROM {c} WHERE xmin = ANY({cx}) "
                    "UNION SELECT {keys} FROM {a} WHERE xmin = ANY({ax}))").format(
                        keys=keys, c=cand, a=active, cx=_xids(late[0]), ax=_xids(late[1])),
            sql.SQL("cs AS ({})").format(kept(cand)), sql.SQL("as_ AS ({})").format(kept(active))]


def _query(cand: sql.Identifier, active: sql.Identifier, key: tuple[str, ...],
           compared: tuple[str, ...], ranges: int,
           late: tuple[list[str], list[str]] = ([], [])) -> sql.Composed:
    """One statement: counts, per-column counts, examples, keys left out as in flight (and
    differing ranges, hashed)."""
    c, a = sql.Identifier("c"), sql.Identifier("a")
    pc, pa = sql.Identifier(PRESENT_C), sql.Identifier(PRESENT_A)
    where: sql.Composable = sql.SQL("")
    ctes: list[sql.Composable] = _settled(cand, active, key, late)
    cand, active = sql.Identifier("cs"), sql.Identifier("as_")
    if ranges:
        ctes += [sql.SQL("cr AS ({})").format(_ranges(cand, key, compared, ranges)),
                sql.SQL("ar AS ({})").format(_ranges(active, key, compared, ranges)),
                sql.SQL("differing AS (SELECT coalesce(cr.b, ar.b) AS b FROM cr FULL JOIN ar "
                        "ON cr.b = ar.b WHERE cr.n IS DISTINCT FROM ar.n "
                        "OR cr.s IS DISTINCT FROM ar.s)")]
        where = sql.SQL(" WHERE {} IN (SELECT b FROM differing)").format(_bucket(key, ranges))
    flags = [sql.SQL("{c}.{col} IS DISTINCT FROM {a}.{col} AS {d}").format(
        c=c, a=a, col=sql.Identifier(col), d=sql.Identifier(f"d{i}"))
        for i, col in enumerate(compared)]
    differs = (sql.SQL(" OR ({}) IS DISTINCT FROM ({})").format(
        sql.SQL(", ").join(sql.SQL("{}.{}").format(c, sql.Identifier(col)) for col in compared),
        sql.SQL(", ").join(sql.SQL("{}.{}").format(a, sql.Identifier(col)) for col in compared))
        if compared else sql.SQL(""))
    # ROW(x) IS DISTINCT FROM ROW(y) for one column: a one-element list needs ROW().
    if len(compared) == 1:
        differs = sql.SQL(" OR {c}.{col} IS DISTINCT FROM {a}.{col}").format(
            c=c, a=a, col=sql.Identifier(compared[0]))
    ctes.append(sql.SQL(
        "d AS MATERIALIZED (SELECT {key} AS k, {a}.{pa} IS NULL AS oc, {c}.{pc} IS NULL AS oa"
        "{flags} FROM ({cside}) {c} FULL JOIN ({aside}) {a} USING ({keys}) "
        "WHERE {c}.{pc} IS NULL OR {a}.{pa} IS NULL{differs})").format(
            key=_key_text(key), a=a, c=c, pa=pa, pc=pc,
            flags=sql.SQL("").join(sql.SQL(", {}").format(f) for f in flags),
            cside=_side(cand, PRESENT_C, key, compared, where),
            aside=_side(active, PRESENT_A, key, compared, where),
            keys=sql.SQL(", ").join(sql.Identifier(k) for k in key), differs=differs))
    both = sql.SQL("NOT oc AND NOT oa")
    limit = sql.Literal(EXAMPLES)

    def examples(condition: sql.Composable) -> sql.Composed:
        return sql.SQL("ARRAY(SELECT k FROM d WHERE {} ORDER BY k LIMIT {})").format(
            condition, limit)

    d_i = [sql.Identifier(f"d{i}") for i in range(len(compared))]
    selected: list[sql.Composable] = [
        sql.SQL("count(*) FILTER (WHERE oc)"), sql.SQL("count(*) FILTER (WHERE oa)"),
        sql.SQL("count(*) FILTER (WHERE {})").format(both),
        *(sql.SQL("count(*) FILTER (WHERE {} AND {})").format(both, d) for d in d_i),
        examples(sql.SQL("oc")), examples(sql.SQL("oa")), examples(both),
        *(examples(sql.SQL("{} AND {}").format(both, d)) for d in d_i),
        sql.SQL("(SELECT count(*) FROM inflight)")]
    if ranges:
        selected.append(sql.SQL("(SELECT count(*) FROM differing)"))
    return sql.SQL("WITH {} SELECT {} FROM d").format(sql.SQL(", ").join(ctes),
                                                     sql.SQL(", ").join(selected))
