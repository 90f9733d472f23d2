"""The operator's PostgreSQL adapter against real PostgreSQL: ledger, alias switch, drop,
and what people attach to the alias (grants, owner, dependents) across cutovers."""

from __future__ import annotations

import datetime as dt
import json
import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
from psycopg import sql

from derived_views.adapters.postgres import sink as pg
from derived_views.adapters.sink_contract import AliasConflict
from derived_views.core.observed import IndexOwner
from dvstack.testing.waiting import wait_for

NS_A, NS_V = IndexOwner("ns", "a", "uid-a"), IndexOwner("ns", "v", "uid-v")


def _ledger(conn: psycopg.Connection[Any], schema: str) -> None:
    conn.execute(f'CREATE TABLE "{schema}".dv_ledger (revision text, batch_id bigint, '
                 "end_offsets jsonb, rows_upserted bigint DEFAULT 0, rows_deleted bigint DEFAULT 0, "
                 "committed_at timestamptz DEFAULT now(), PRIMARY KEY (revision, batch_id))")


def test_ledger_positions_take_the_newest_batch_per_revision(conn: Any, schema: str) -> None:
    assert pg.ledger_positions(conn, schema, ["a"]) == {}  # no ledger table yet
    _ledger(conn, schema)
    conn.execute(f'INSERT INTO "{schema}".dv_ledger (revision, batch_id, end_offsets, committed_at) '
                 "VALUES ('a', 0, '{\"t\": {\"0\": 5, \"1\": 7}}', '2026-01-01T00:00:00Z'), "
                 "('a', 1, '{\"t\": {\"0\": 9, \"1\": 7}}', '2026-01-01T00:00:05Z'), "
                 "('b', 0, '{\"t\": {\"0\": 1}}', '2026-01-01T00:00:01Z')")
    got = pg.ledger_positions(conn, schema, ["a", "b", "c"])
    assert set(got) == {"a", "b"}
    assert got["a"].batch_id == 1
    assert got["a"].end_offsets == {("t", 0): 9, ("t", 1): 7}
    assert got["a"].committed_at == dt.datetime(2026, 1, 1, 0, 0, 5, tzinfo=dt.UTC)
    assert got["b"].end_offsets == {("t", 0): 1}
    assert got["b"].earlier is None  # one batch: no rate yet
    assert got["a"].earlier is not None and got["a"].earlier.batch_id == 0  # young: the first


def test_the_history_start_is_read_from_the_newest_row_with_or_without_the_column(
        conn: Any, schema: str) -> None:
    """A ledger from before jobs recorded where their replay began has no such column: read
    as not recorded. Once a job adds it (its own DDL), rows written before stay NULL, and a
    revision's history start is its newest row's."""
    from dvjob.sinks.postgres.sink import history_start_column_ddl

    _ledger(conn, schema)
    conn.execute(f'INSERT INTO "{schema}".dv_ledger (revision, batch_id, end_offsets) VALUES '
                 """('a', 0, '{"t": {"0": 5}}'), ('b', 0, '{"t": {"0": 3}}')""")
    before = pg.ledger_positions(conn, schema, ["a", "b"])
    assert before["a"].history_start is None and before["b"].history_start is None
    assert before["a"].end_offsets == {("t", 0): 5}

    conn.execute(history_start_column_ddl(schema, "dv_ledger"))
    conn.execute(f'INSERT INTO "{schema}".dv_ledger (revision, batch_id, end_offsets, '
                 "history_start) VALUES (%s, 1, %s, %s)",
                 ("a", json.dumps({"t": {"0": 9, "1": 4}}),
                  json.dumps({"t": {"0": 2, "1": 0}})))
    after = pg.ledger_positions(conn, schema, ["a", "b"])
    assert after["a"].batch_id == 1
    assert after["a"].history_start == {("t", 0): 2, ("t", 1): 0}
    assert after["a"].earlier is not None and after["a"].earlier.history_start is None
    assert after["b"].history_start is None  # written by a job from before: NULL


def test_the_earlier_batch_is_the_newest_one_a_rate_window_before(conn: Any, schema: str) -> None:
    _ledger(conn, schema)
    rows = [(0, "00:00", 10), (1, "00:20", 30), (2, "00:29", 40), (3, "00:31", 45),
            (4, "01:00", 90)]  # newest at 01:00: rows at or before 00:30 qualify -> batch 2
    for batch, at, offset in rows:
        conn.execute(f'INSERT INTO "{schema}".dv_ledger (revision, batch_id, end_offsets, '
                     "committed_at) VALUES ('a', %s, %s, %s)",
                     (batch, f'{{"t": {{"0": {offset}}}}}', f"2026-01-01T00:{at}Z"))
    earlier = pg.ledger_positions(conn, schema, ["a"])["a"].earlier
    assert earlier is not None
    assert (earlier.batch_id, earlier.end_offsets) == (2, {("t", 0): 40})
    assert earlier.committed_at == dt.datetime(2026, 1, 1, 0, 0, 29, tzinfo=dt.UTC)


def test_switch_alias_is_guarded_and_idempotent(conn: Any, schema: str) -> None:
    conn.execute(f'CREATE TABLE "{schema}".v__r1 (k text PRIMARY KEY, n int)')
    conn.execute(f'CREATE TABLE "{schema}".v__r2 (k text PRIMARY KEY, n int, extra text)')
    conn.execute(f"INSERT INTO \"{schema}\".v__r1 VALUES ('a', 1)")
    conn.execute(f"INSERT INTO \"{schema}\".v__r2 VALUES ('a', 2, 'x')")
    assert pg.alias_target(conn, schema, "v") is None
    with pytest.raises(RuntimeError, match="does not exist"):
        pg.switch_alias(conn, schema, "v", "v__missing", None, owner=NS_A)
    pg.switch_alias(conn, schema, "v", "v__r1", None, owner=NS_A)
    assert pg.alias_target(conn, schema, "v") == "v__r1"
    assert conn.execute(f'SELECT n FROM "{schema}".v').fetchall() == [(1,)]
    with pytest.raises(AliasConflict):
        pg.switch_alias(conn, schema, "v", "v__r2", "v__other", owner=NS_A)
    pg.switch_alias(conn, schema, "v", "v__r2", "v__r1", owner=NS_A)  # new columns are fine
    pg.switch_alias(conn, schema, "v", "v__r2", "v__r1", owner=NS_A)  # already there: no-op
    assert conn.execute(f'SELECT n, extra FROM "{schema}".v').fetchall() == [(2, "x")]
    with pytest.raises(RuntimeError, match="served by view"):
        pg.drop_index(conn, schema, "v__r2", "r2", owner_uid="uid-a")
    pg.drop_index(conn, schema, "v__r1", "r1", owner_uid="uid-a")
    assert set(pg.existing_tables(conn, schema, ["v__r1", "v__r2"])) == {"v__r2"}


def test_readers_see_no_error_while_the_alias_switches(stack: Any, conn: Any, schema: str) -> None:
    for rev in ("r1", "r2"):
        conn.execute(f'CREATE TABLE "{schema}"."v__{rev}" (k int PRIMARY KEY, rev text)')
        conn.execute(f"INSERT INTO \"{schema}\".\"v__{rev}\" SELECT g, '{rev}' FROM generate_series(1, 1000) g")
    pg.switch_alias(conn, schema, "v", "v__r1", None, owner=NS_A)
    errors: list[str] = []
    stalls: list[float] = []
    seen: set[str] = set()
    stop = threading.Event()

    def reader() -> None:
        with psycopg.connect(stack.pg_dsn, autocommit=True) as rc:
            while not stop.is_set():
                t = time.perf_counter()
                try:
                    rows = rc.execute(f'SELECT rev, count(*) FROM "{schema}".v GROUP BY rev').fetchall()
                    if len(rows) != 1 or rows[0][1] != 1000:
                        errors.append(f"inconsistent read {rows}")
                    seen.add(rows[0][0])
                except psycopg.Error as exc:
                    errors.append(repr(exc))
                stalls.append(time.perf_counter() - t)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for th in threads:
        th.start()
    current = "v__r1"
    for _ in range(40):
        target = "v__r2" if current == "v__r1" else "v__r1"
        with psycopg.connect(stack.pg_dsn, autocommit=True) as sc:
            pg.switch_alias(sc, schema, "v", target, current, owner=NS_A)
        current = target
    stop.set()
    for th in threads:
        th.join(timeout=30)
    assert errors == []
    assert seen == {"r1", "r2"}
    assert len(stalls) > 40


def test_existing_tables_report_the_row_estimate_after_analyze(conn: Any, schema: str) -> None:
    conn.execute(f'CREATE TABLE "{schema}"."est__r1" (k int PRIMARY KEY)')
    conn.execute(f'INSERT INTO "{schema}"."est__r1" SELECT g FROM generate_series(1, 1234) g')
    conn.execute(f'ANALYZE "{schema}"."est__r1"')
    assert pg.existing_tables(conn, schema, ["est__r1", "est__r2"]) == {"est__r1": 1234}


def _alias_comment(conn: Any, schema: str, alias: str) -> Any:
    row = conn.execute("SELECT obj_description(to_regclass(%s), 'pg_class')",
                       (sql.Identifier(schema, alias).as_string(conn),)).fetchone()
    return json.loads(row[0]) if row and row[0] else None


SHOP = IndexOwner("shop", "orders", "uid-shop")


def test_an_alias_owned_by_another_view_is_never_switched(conn: Any, schema: str) -> None:
    for rev in ("r1", "r2"):
        conn.execute(f'CREATE TABLE "{schema}"."own__{rev}" (k int)')
    assert pg.alias_owner(conn, schema, "own") is None  # no alias yet
    pg.switch_alias(conn, schema, "own", "own__r1", None, owner=SHOP)
    assert pg.alias_owner(conn, schema, "own") == SHOP
    assert _alias_comment(conn, schema, "own") == {  # as an index table records its owner
        "derivedviews.io/owner": {"namespace": "shop", "name": "orders", "uid": "uid-shop"},
        "derivedviews.io/serving": "own__r1"}
    billing = IndexOwner("billing", "orders", "uid-billing")
    with pytest.raises(AliasConflict, match=r"belongs to DerivedView shop/orders \(uid "
                                               r"uid-shop\), not to DerivedView billing/orders"):
        pg.switch_alias(conn, schema, "own", "own__r2", "own__r1", owner=billing)
    assert pg.alias_target(conn, schema, "own") == "own__r1"
    conn.execute(f'COMMENT ON VIEW "{schema}"."own" IS \'made by hand\'')
    assert pg.alias_owner(conn, schema, "own") is None  # unmarked: the next switch claims it
    pg.switch_alias(conn, schema, "own", "own__r1", "own__r1", owner=billing)
    assert pg.alias_owner(conn, schema, "own") == billing


def test_a_view_re_created_under_the_name_never_switches_the_old_one_s_alias(
        conn: Any, schema: str) -> None:
    """Deleted with deletionPolicy Retain, applied again: same namespace and name, another
    UID, other SQL (so another index): the alias stays on the old view's index."""
    for rev in ("r1", "r2"):
        conn.execute(f'CREATE TABLE "{schema}"."again__{rev}" (k int)')
    pg.switch_alias(conn, schema, "again", "again__r1", None, owner=SHOP)
    re_created = IndexOwner("shop", "orders", "uid-shop-again")
    with pytest.raises(AliasConflict, match="belongs to DerivedView shop/orders "
                                               r"\(uid uid-shop\)"):
        pg.switch_alias(conn, schema, "again", "again__r2", "again__r1", owner=re_created)
    with pytest.raises(AliasConflict):  # nor repaired onto the index it serves
        pg.switch_alias(conn, schema, "again", "again__r1", "again__r1", owner=re_created)
    assert pg.alias_target(conn, schema, "again") == "again__r1"
    assert pg.alias_owner(conn, schema, "again") == SHOP


def test_an_alias_recorded_by_name_only_is_judged_by_name_and_gets_the_uid(
        conn: Any, schema: str) -> None:
    """An alias an operator from before UIDs were recorded switched: its view (by name)
    switches it, and records its UID; from then on it is judged by UID."""
    for rev in ("r1", "r2"):
        conn.execute(f'CREATE TABLE "{schema}"."old__{rev}" (k int)')
    pg.switch_alias(conn, schema, "old", "old__r1", None, owner=SHOP)
    conn.execute(f'COMMENT ON VIEW "{schema}"."old" IS '
                 "'derivedviews.io owner=shop/orders; serving index old__r1'")
    assert pg.alias_owner(conn, schema, "old") == IndexOwner("shop", "orders", "")
    with pytest.raises(AliasConflict, match="belongs to DerivedView shop/orders, not to"):
        pg.switch_alias(conn, schema, "old", "old__r2", "old__r1",
                        owner=IndexOwner("billing", "orders", "uid-billing"))
    pg.switch_alias(conn, schema, "old", "old__r1", "old__r1", owner=SHOP)  # same index
    assert pg.alias_owner(conn, schema, "old") == SHOP
    with pytest.raises(AliasConflict):
        pg.switch_alias(conn, schema, "old", "old__r2", "old__r1",
                        owner=IndexOwner("shop", "orders", "uid-shop-again"))


def test_a_switch_refuses_an_index_another_view_records_and_an_owner_without_uid(
        conn: Any, schema: str) -> None:
    conn.execute(f'CREATE TABLE "{schema}"."idx__r1" (k text PRIMARY KEY)')
    _owned(conn, schema, "idx__r2", "billing", "orders", "uid-billing")
    pg.switch_alias(conn, schema, "idx", "idx__r1", None, owner=SHOP)
    with pytest.raises(AliasConflict, match="index .*idx__r2 belongs to DerivedView "
                                               r"billing/orders \(uid uid-billing\)"):
        pg.switch_alias(conn, schema, "idx", "idx__r2", "idx__r1", owner=SHOP)
    with pytest.raises(ValueError, match="needs its view's uid"):
        pg.switch_alias(conn, schema, "idx", "idx__r1", "idx__r1",
                        owner=IndexOwner("shop", "orders", ""))
    assert pg.alias_target(conn, schema, "idx") == "idx__r1"


# What people attach to the alias survives a cutover ------------------------------------------

@dataclass
class Roles:
    """Login roles made for one test (cluster-wide names, so unique), dropped afterwards."""

    stack: Any
    admin: psycopg.Connection[Any]
    passwords: dict[str, str] = field(default_factory=dict)

    def make(self, hint: str, *, login: bool = True) -> str:
        name = f"dv_{hint}_{uuid.uuid4().hex[:6]}"
        password = secrets.token_hex(12)
        self.admin.execute(sql.SQL("CREATE ROLE {} {} PASSWORD {}").format(
            sql.Identifier(name), sql.SQL("LOGIN" if login else "NOLOGIN"), sql.Literal(password)))
        self.passwords[name] = password
        return name

    def connect(self, role: str) -> psycopg.Connection[Any]:
        pg_ = self.stack.pg
        return psycopg.connect(host=pg_["host"], port=pg_["port"], dbname=pg_["database"],
                               user=role, password=self.passwords[role], autocommit=True,
                               prepare_threshold=None)


@pytest.fixture()
def roles(stack: Any, schema: str) -> Iterator[Roles]:
    with psycopg.connect(stack.pg_dsn, autocommit=True) as admin:
        made = Roles(stack, admin)
        yield made
        if made.passwords:
            names = sql.SQL(", ").join(map(sql.Identifier, made.passwords))
            admin.execute(sql.SQL("DROP OWNED BY {}").format(names))
            admin.execute(sql.SQL("DROP ROLE {}").format(names))


def _index(conn: psycopg.Connection[Any], schema: str, table: str, columns: str,
           rows: str) -> None:
    conn.execute(f'CREATE TABLE "{schema}"."{table}" ({columns})')
    conn.execute(f'INSERT INTO "{schema}"."{table}" {rows}')


def _grants(conn: psycopg.Connection[Any], schema: str, view: str) -> tuple[str, list[str],
                                                                            dict[str, list[str]]]:
    """Owner, table ACL and column ACLs exactly as pg_class / pg_attribute hold them."""
    row = conn.execute("SELECT relowner::regrole::text, relacl::text[] FROM pg_class "
                       "WHERE oid = to_regclass(%s)", (f'"{schema}"."{view}"',)).fetchone()
    assert row is not None
    columns = conn.execute("SELECT attname, attacl::text[] FROM pg_attribute "
                           "WHERE attrelid = to_regclass(%s) AND attacl IS NOT NULL",
                           (f'"{schema}"."{view}"',)).fetchall()
    return row[0], sorted(row[1] or []), {name: sorted(acl) for name, acl in columns}


def test_a_reader_with_select_on_the_alias_only_reads_through_every_cutover(
        stack: Any, conn: Any, schema: str, roles: Roles) -> None:
    reader = roles.make("reader")
    conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO {reader}')
    rows = "SELECT g, '{rev}', 'x' FROM generate_series(1, 2000) g"
    _index(conn, schema, "g__r1", "k int PRIMARY KEY, rev text",
           "SELECT g, 'r1' FROM generate_series(1, 2000) g")
    _index(conn, schema, "g__r2", "k int PRIMARY KEY, rev text, extra text", rows.format(rev="r2"))
    _index(conn, schema, "g__r3", "k int PRIMARY KEY, rev text, extra text", rows.format(rev="r3"))
    pg.switch_alias(conn, schema, "g", "g__r1", None, owner=NS_A)
    conn.execute(f'GRANT SELECT ON "{schema}".g TO {reader}')
    for table in ("g__r1", "g__r2", "g__r3"):
        assert not conn.execute("SELECT has_table_privilege(%s, %s, 'SELECT')",
                                (reader, f'"{schema}"."{table}"')).fetchone()[0]

    errors: list[str] = []
    stalls: list[float] = []
    seen: set[str] = set()
    stop = threading.Event()

    def read() -> None:
        with roles.connect(reader) as rc:
            while not stop.is_set():
                started = time.perf_counter()
                try:
                    got = rc.execute(f'SELECT rev, count(*) FROM "{schema}".g GROUP BY rev'
                                     ).fetchall()
                    if len(got) != 1 or got[0][1] != 2000:
                        errors.append(f"inconsistent read {got}")
                    else:
                        seen.add(got[0][0])
                except psycopg.Error as exc:
                    errors.append(str(exc).splitlines()[0])
                stalls.append(time.perf_counter() - started)

    threads = [threading.Thread(target=read) for _ in range(2)]
    for thread in threads:
        thread.start()
    # r1 -> r2 adds a column (in place), r2 -> r3 keeps them, r3 -> r1 drops one (re-created)
    current = "g__r1"
    try:
        for target in ["g__r2", "g__r3", "g__r1"] * 4:
            reads = len(stalls)
            wait_for(lambda n=reads: len(stalls) > n + 5, timeout=30, what="reads between switches")
            with psycopg.connect(stack.pg_dsn, autocommit=True) as sc:
                pg.switch_alias(sc, schema, "g", target, current, owner=NS_A)
            current = target
        reads = len(stalls)
        wait_for(lambda: len(stalls) > reads + 5, timeout=30, what="reads after the last switch")
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    print(f"\n{len(stalls)} reads through 12 cutovers as a SELECT-only role, {len(errors)} errors, "
          f"worst stall {max(stalls) * 1000:.1f} ms, median {sorted(stalls)[len(stalls) // 2] * 1000:.2f} ms")
    assert errors == []
    assert seen == {"r1", "r2", "r3"}
    assert max(stalls) < 5.0  # under the switch's lock_timeout


def test_grants_and_owner_are_the_same_after_every_kind_of_switch(
        conn: Any, schema: str, roles: Roles) -> None:
    owner, one, two = roles.make("owner", login=False), roles.make("one"), roles.make("two")
    three = roles.make("three")
    conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO {one}, {two}, {three}')
    conn.execute(f'GRANT USAGE, CREATE ON SCHEMA "{schema}" TO {owner}')
    _index(conn, schema, "acl__a", "k int PRIMARY KEY, n int", "VALUES (1, 10)")
    _index(conn, schema, "acl__b", "k int PRIMARY KEY, n int, extra text", "VALUES (2, 20, 'x')")
    _index(conn, schema, "acl__c", "k int PRIMARY KEY, extra text", "VALUES (3, 'y')")
    pg.switch_alias(conn, schema, "acl", "acl__a", None, owner=NS_A)
    view = f'"{schema}".acl'
    conn.execute(f"ALTER VIEW {view} OWNER TO {owner}")
    conn.execute(f"GRANT SELECT ON {view} TO {one}")
    conn.execute(f"GRANT SELECT, INSERT ON {view} TO {two} WITH GRANT OPTION")
    conn.execute(f"GRANT UPDATE (k) ON {view} TO {one}")
    with roles.connect(two) as grantor:  # a grant made by a role holding the grant option
        grantor.execute(f"GRANT SELECT ON {view} TO {three}")
    conn.execute(f"ALTER VIEW {view} SET (security_barrier = true)")
    before = _grants(conn, schema, "acl")
    assert before[0] == owner and len(before[1]) == 4 and set(before[2]) == {"k"}
    assert f"{three}=r/{two}" in before[1]

    # b adds a column (CREATE OR REPLACE), c drops one (DROP + CREATE), a drops one again
    for previous, target, k in (("acl__a", "acl__b", 2), ("acl__b", "acl__c", 3),
                                ("acl__c", "acl__a", 1)):
        pg.switch_alias(conn, schema, "acl", target, previous, owner=NS_A)
        assert _grants(conn, schema, "acl") == before, target
        assert conn.execute("SELECT reloptions FROM pg_class WHERE oid = to_regclass(%s)",
                            (view,)).fetchone()[0] == ["security_barrier=true"]
        with roles.connect(one) as reader:  # the owner was given SELECT on the new index
            assert reader.execute(f"SELECT k FROM {view}").fetchall() == [(k,)]


def test_a_dependent_view_keeps_answering_and_an_incompatible_switch_is_refused(
        conn: Any, schema: str) -> None:
    _index(conn, schema, "dep__d1", "k int PRIMARY KEY, n int", "VALUES (1, 10)")
    _index(conn, schema, "dep__d2", "n int, k int PRIMARY KEY, extra text",
           "VALUES (20, 2, 'x'), (30, 3, 'y')")  # same columns in another order, plus one
    _index(conn, schema, "dep__d3", "k int PRIMARY KEY, n text", "VALUES (4, 'forty')")
    pg.switch_alias(conn, schema, "dep", "dep__d1", None, owner=NS_A)
    conn.execute(f'CREATE VIEW "{schema}".report AS SELECT k, n * 2 AS twice FROM "{schema}".dep')
    conn.execute(f'CREATE MATERIALIZED VIEW "{schema}".snap AS '
                 f'SELECT count(*) AS n FROM "{schema}".dep')
    pg.switch_alias(conn, schema, "dep", "dep__d2", "dep__d1", owner=NS_A)
    assert conn.execute(f'SELECT k, twice FROM "{schema}".report ORDER BY k').fetchall() == [
        (2, 40), (3, 60)]
    conn.execute(f'REFRESH MATERIALIZED VIEW "{schema}".snap')
    assert conn.execute(f'SELECT n FROM "{schema}".snap').fetchall() == [(2,)]
    assert conn.execute(f'SELECT * FROM "{schema}".dep ORDER BY k LIMIT 1').fetchall() == [
        (2, 20, "x")]  # the old columns keep their places; the new one comes last

    blockers = pg.switch_blockers(conn, schema, "dep", ["dep__d1", "dep__d3"])
    assert set(blockers) == {"dep__d1", "dep__d3"}  # d1 lacks extra, d3 changes n's type
    refused = blockers["dep__d3"]
    assert refused.reason == "AliasDependents"
    assert refused.message == (
        f"materialized view {schema}.snap and view {schema}.report depend on view {schema}.dep, "
        "and index dep__d3 changes column n from integer to text; drops column extra, so the "
        "view would have to be dropped: drop the dependents and re-create them after the "
        "cutover, or keep the old columns unchanged in the new revision")
    definition = conn.execute("SELECT pg_get_viewdef(to_regclass(%s))",
                              (f'"{schema}".dep',)).fetchone()
    with pytest.raises(pg.SwitchRefused) as caught:
        pg.switch_alias(conn, schema, "dep", "dep__d3", "dep__d2", owner=NS_A)
    assert str(caught.value) == refused.message
    assert pg.alias_target(conn, schema, "dep") == "dep__d2"
    assert conn.execute("SELECT pg_get_viewdef(to_regclass(%s))",
                        (f'"{schema}".dep',)).fetchone() == definition
    assert conn.execute(f'SELECT count(*) FROM "{schema}".report').fetchone() == (2,)

    conn.execute(f'DROP VIEW "{schema}".report')
    conn.execute(f'DROP MATERIALIZED VIEW "{schema}".snap')
    assert pg.switch_blockers(conn, schema, "dep", ["dep__d3"]) == {}
    pg.switch_alias(conn, schema, "dep", "dep__d3", "dep__d2", owner=NS_A)
    assert conn.execute(f'SELECT k, n FROM "{schema}".dep').fetchall() == [(4, "forty")]


def test_an_operator_without_superuser_switches_and_refuses_what_it_cannot_keep(
        conn: Any, schema: str, roles: Roles) -> None:
    op, app, reader = roles.make("op"), roles.make("app", login=False), roles.make("reader")
    conn.execute(f'GRANT USAGE, CREATE ON SCHEMA "{schema}" TO {op}, {app}')
    conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO {reader}')
    view = f'"{schema}".ops'
    with roles.connect(op) as oc:
        assert not oc.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
                              ).fetchone()[0]
        # the job creates the indexes with the same Secret's role
        _index(oc, schema, "ops__e1", "k int PRIMARY KEY, n int", "VALUES (1, 10)")
        _index(oc, schema, "ops__e2", "k int PRIMARY KEY, n int, extra text", "VALUES (2, 20, 'x')")
        _index(oc, schema, "ops__e3", "k int PRIMARY KEY, extra text", "VALUES (3, 'y')")
        pg.switch_alias(oc, schema, "ops", "ops__e1", None, owner=NS_A)
        oc.execute(f"GRANT SELECT ON {view} TO {reader}")
        pg.switch_alias(oc, schema, "ops", "ops__e2", "ops__e1", owner=NS_A)

        # A DBA hands the alias to another role the operator's role belongs to
        conn.execute(f"ALTER VIEW {view} OWNER TO {app}")
        conn.execute(f"GRANT {app} TO {op}")
        before = _grants(conn, schema, "ops")
        pg.switch_alias(oc, schema, "ops", "ops__e3", "ops__e2", owner=NS_A)  # re-created
        assert _grants(conn, schema, "ops") == before and before[0] == app
        with roles.connect(reader) as rc:
            assert rc.execute(f"SELECT k FROM {view}").fetchall() == [(3,)]

        conn.execute(f"REVOKE {app} FROM {op}")
        blockers = pg.switch_blockers(oc, schema, "ops", ["ops__e1"])
        assert blockers["ops__e1"].reason == "AliasOwner"
        assert blockers["ops__e1"].message == (
            f"view {schema}.ops is owned by role {app}, and role {op} (the sink Secret's user) "
            f"cannot act as it: GRANT {app} TO {op}, or ALTER VIEW {schema}.ops OWNER TO {op}")
        with pytest.raises(pg.SwitchRefused, match=f"GRANT {app} TO {op}"):
            pg.switch_alias(oc, schema, "ops", "ops__e1", "ops__e3", owner=NS_A)
        assert pg.alias_target(oc, schema, "ops") == "ops__e3"
        assert _grants(conn, schema, "ops") == before

        # an index the alias owner cannot read, and the operator cannot grant
        conn.execute(f"GRANT {app} TO {op}")
        _index(conn, schema, "ops__e4", "k int PRIMARY KEY, extra text", "VALUES (4, 'z')")
        with pytest.raises(pg.SwitchRefused, match=f"GRANT SELECT ON {schema}.ops__e4 TO {app}"):
            pg.switch_alias(oc, schema, "ops", "ops__e4", "ops__e3", owner=NS_A)
        assert pg.alias_target(oc, schema, "ops") == "ops__e3"


# Bounded: pruning, timeouts, what blocks a drop ---------------------------------------------

def _ledger_rows(conn: Any, schema: str, revision: str, count: int, step_seconds: int,
                 start: dt.datetime) -> None:
    for batch in range(count):
        at = start + dt.timedelta(seconds=batch * step_seconds)
        conn.execute(f'INSERT INTO "{schema}".dv_ledger (revision, batch_id, end_offsets, '
                     "committed_at) VALUES (%s, %s, %s, %s)",
                     (revision, batch, f'{{"t": {{"0": {batch * 10}}}}}', at))


def _batches(conn: Any, schema: str, revision: str) -> list[int]:
    rows = conn.execute(f'SELECT batch_id FROM "{schema}".dv_ledger WHERE revision = %s '
                        "ORDER BY 1", (revision,)).fetchall()
    return [int(r[0]) for r in rows]


def test_prune_ledger_keeps_what_resume_and_the_rate_read(conn: Any, schema: str) -> None:
    _ledger(conn, schema)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    _ledger_rows(conn, schema, "long", 200, 2, start)   # 400 s of batches every 2 s
    _ledger_rows(conn, schema, "young", 10, 2, start)   # 20 s: younger than the rate window
    _ledger_rows(conn, schema, "other", 200, 2, start)  # not asked about: untouched
    before = pg.ledger_positions(conn, schema, ["long", "young"])
    gone = pg.prune_ledger(conn, schema, ["long", "young"], keep_batches=20)
    # newest batch 199 at 398 s; the rate's earlier row is the newest <= 368 s: batch 184.
    # kept: from min(184, 199 - 20 = 179) on
    assert _batches(conn, schema, "long") == list(range(179, 200))
    assert _batches(conn, schema, "young") == list(range(10))
    assert len(_batches(conn, schema, "other")) == 200
    assert gone == 179
    assert pg.ledger_positions(conn, schema, ["long", "young"]) == before
    assert pg.prune_ledger(conn, schema, ["long", "young"], keep_batches=20) == 0


def test_prune_ledger_keeps_the_bad_record_counts(conn: Any, schema: str) -> None:
    """The status shows the sum of each revision's ledger rows' bad_records: pruning moves
    what the pruned rows counted into the oldest kept row, never loses it."""
    from derived_views.adapters.postgres.bad_records import bad_record_counts

    _ledger(conn, schema)
    conn.execute(f'ALTER TABLE "{schema}".dv_ledger ADD COLUMN bad_records bigint NOT NULL '
                 "DEFAULT 0")
    _ledger_rows(conn, schema, "long", 200, 2, dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    # batch n left out n % 3 records: 0+1+2+0+1+2... over 200 batches = 66*3 + (0+1) = 199
    conn.execute(f'UPDATE "{schema}".dv_ledger SET bad_records = batch_id % 3')
    assert bad_record_counts(conn, schema, ["long"]) == {"long": 199}
    assert pg.prune_ledger(conn, schema, ["long"], keep_batches=20) == 179
    assert _batches(conn, schema, "long") == list(range(179, 200))
    assert bad_record_counts(conn, schema, ["long"]) == {"long": 199}
    newest = conn.execute(f'SELECT bad_records FROM "{schema}".dv_ledger WHERE batch_id = 199'
                          ).fetchone()
    assert newest == (199 % 3,)  # the job's newest row is never rewritten


def test_a_held_lock_makes_the_switch_fail_in_bounded_time(stack: Any, schema: str) -> None:
    """A reader holding a lock on the alias: the switch gives up at its lock_timeout instead of
    waiting (and holding the view's lock and a worker thread) for as long as the reader likes."""
    with psycopg.connect(stack.pg_dsn, autocommit=True) as setup:
        setup.execute(f'CREATE TABLE "{schema}".t__a (k text PRIMARY KEY)')
        setup.execute(f'CREATE TABLE "{schema}".t__b (k text PRIMARY KEY)')
    creds = pg.PgConnection.from_secret_data(_secret_data(stack))
    with creds.connect(autocommit=True) as op:
        pg.switch_alias(op, schema, "t", "t__a", None, owner=NS_V)
    with psycopg.connect(stack.pg_dsn) as holder:
        holder.execute(f'LOCK TABLE "{schema}".t IN ACCESS SHARE MODE')  # an open transaction
        with creds.connect(autocommit=True) as op:
            started = time.monotonic()
            with pytest.raises(psycopg.errors.LockNotAvailable):
                pg.switch_alias(op, schema, "t", "t__b", "t__a", owner=NS_V,
                                lock_timeout_ms=1000)
            took = time.monotonic() - started
            assert took < 5, took
            # every other statement of the operator's sessions is bounded too
            timeouts = op.execute("SELECT current_setting('statement_timeout'), "
                                  "current_setting('lock_timeout')").fetchone()
            assert timeouts == ("30s", "10s")
        holder.rollback()


def test_drop_blockers_name_others_objects_on_the_alias_and_indexes(conn: Any,
                                                                    schema: str) -> None:
    conn.execute(f'CREATE TABLE "{schema}".t__a (k text PRIMARY KEY, n int)')
    conn.execute(f'CREATE TABLE "{schema}".t__b (k text PRIMARY KEY, n int)')
    pg.switch_alias(conn, schema, "t", "t__a", None, owner=NS_V)
    assert pg.drop_blockers(conn, schema, "t", ["t__a", "t__b"]) == ()  # the alias is ours
    conn.execute(f'CREATE VIEW "{schema}".report AS SELECT count(*) FROM "{schema}".t')
    conn.execute(f'CREATE VIEW "{schema}".direct AS SELECT k FROM "{schema}".t__b')
    assert pg.drop_blockers(conn, schema, "t", ["t__a", "t__b"]) == (
        f"view {schema}.direct", f"view {schema}.report")


def _secret_data(stack: Any) -> dict[str, str]:
    info = psycopg.conninfo.conninfo_to_dict(stack.pg_dsn)
    return {k: str(info[v]) for k, v in (("host", "host"), ("port", "port"),
                                         ("database", "dbname"), ("user", "user"),
                                         ("password", "password")) if v in info}


def _owned(conn: Any, schema: str, table: str, namespace: str, name: str, uid: str) -> None:
    """A table as the job creates it: its owner in the table's comment (spark_templates/README)."""
    conn.execute(sql.SQL("CREATE TABLE {} (k text PRIMARY KEY)").format(
        sql.Identifier(schema, table)))
    comment = json.dumps({"derivedviews.io/owner": {"name": name, "namespace": namespace,
                                                    "uid": uid}})
    conn.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(
        sql.Identifier(schema, table), sql.Literal(comment)))


def test_index_owners_are_read_back_from_the_tables(conn: Any, schema: str) -> None:
    _owned(conn, schema, "v__r1", "shop", "orders", "uid-shop")
    conn.execute(f'CREATE TABLE "{schema}".v__r2 (k text)')  # from before owners: none
    conn.execute(f'CREATE TABLE "{schema}".v__r3 (k text)')
    conn.execute(f"COMMENT ON TABLE \"{schema}\".v__r3 IS 'a note from the DBA'")
    assert pg.index_owners(conn, schema, ["v__r1", "v__r2", "v__r3", "v__gone"]) == {
        "v__r1": IndexOwner("shop", "orders", "uid-shop")}


def test_a_drop_refuses_another_view_s_index_and_keeps_its_ledger_rows(
        conn: Any, schema: str) -> None:
    _ledger(conn, schema)
    _owned(conn, schema, "v__r1", "shop", "orders", "uid-shop")
    conn.execute(f'INSERT INTO "{schema}".dv_ledger (revision, batch_id, end_offsets) '
                 "VALUES ('r1', 0, '{}')")
    with pytest.raises(pg.IndexOwnedElsewhere, match="belongs to DerivedView shop/orders "
                                                     r"\(uid uid-shop\)"):
        pg.drop_index(conn, schema, "v__r1", "r1", owner_uid="uid-billing")
    with pytest.raises(pg.IndexOwnedElsewhere):
        pg.drop_index(conn, schema, "v__r1", "r1", owner_uid="")  # no claim: no drop
    assert set(pg.existing_tables(conn, schema, ["v__r1"])) == {"v__r1"}
    assert conn.execute(f'SELECT count(*) FROM "{schema}".dv_ledger').fetchone() == (1,)
    pg.drop_index(conn, schema, "v__r1", "r1", owner_uid="uid-shop")
    assert pg.existing_tables(conn, schema, ["v__r1"]) == {}
    assert conn.execute(f'SELECT count(*) FROM "{schema}".dv_ledger').fetchone() == (0,)


def test_an_index_with_no_recorded_owner_is_dropped_as_before(conn: Any, schema: str) -> None:
    conn.execute(f'CREATE TABLE "{schema}".v__r1 (k text)')
    pg.drop_index(conn, schema, "v__r1", "r1", owner_uid="uid-shop")
    assert pg.existing_tables(conn, schema, ["v__r1"]) == {}
