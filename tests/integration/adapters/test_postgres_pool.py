"""The operator's sink connection pool against real PostgreSQL: reuse, the bound, and what
is never handed out again (a connection mid-transaction, one the server closed)."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import psycopg
import pytest

from derived_views.adapters.postgres.pool import PgPool
from derived_views.adapters.sink_contract import SinkUnavailable
from dvstack.testing.waiting import wait_for


def _pid(conn: Any) -> int:
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


def _app_connections(dsn: str, app: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as admin:
        row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                            (app,)).fetchone()
    return int(row[0]) if row else 0


@pytest.fixture()
def app() -> str:
    return f"pool-{uuid.uuid4().hex[:8]}"


def _connect(dsn: str, app: str) -> Any:
    return lambda: psycopg.connect(dsn, autocommit=True, application_name=app)


def test_passes_reuse_one_connection(stack: Any, app: str) -> None:
    pool = PgPool(4)
    pids = []
    for _ in range(20):  # twenty passes of one view, one after the other
        conn = pool.acquire("db", _connect(stack.pg_dsn, app))
        pids.append(_pid(conn))
        pool.release("db", conn)
    assert len(set(pids)) == 1
    assert _app_connections(stack.pg_dsn, app) == 1
    pool.close_all()
    # the server ends a closed connection's backend on its own time: wait for it to go
    wait_for(lambda: _app_connections(stack.pg_dsn, app) == 0, timeout=30, interval=0.05,
             what="the pool's closed connection to leave pg_stat_activity")


def test_at_most_size_connections_and_a_waiter_gets_the_first_returned(stack: Any,
                                                                       app: str) -> None:
    pool = PgPool(2, wait_seconds=0.3)
    held = [pool.acquire("db", _connect(stack.pg_dsn, app)) for _ in range(2)]
    with pytest.raises(SinkUnavailable, match="all 2 connections to this sink are busy"):
        pool.acquire("db", _connect(stack.pg_dsn, app))
    assert _app_connections(stack.pg_dsn, app) == 2

    pool.wait_seconds = 60
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(
        pool.acquire("db", _connect(stack.pg_dsn, app))))
    waiter.start()
    pool.release("db", held[0])
    waiter.join(timeout=60)
    assert got and _pid(got[0]) == _pid(held[0])
    assert _app_connections(stack.pg_dsn, app) == 2
    for conn in (got[0], held[1]):
        pool.release("db", conn)
    pool.close_all()


def test_a_connection_left_in_a_transaction_is_closed_not_reused(stack: Any, app: str) -> None:
    pool = PgPool(2)
    conn = pool.acquire("db", _connect(stack.pg_dsn, app))
    first = _pid(conn)
    conn.execute("BEGIN")
    pool.release("db", conn)
    assert conn.closed
    again = pool.acquire("db", _connect(stack.pg_dsn, app))
    assert _pid(again) != first
    pool.release("db", again)
    pool.close_all()


def test_a_connection_the_server_ended_is_replaced_before_a_pass_sees_it(stack: Any,
                                                                         app: str) -> None:
    pool = PgPool(2, ping_after_seconds=0)
    conn = pool.acquire("db", _connect(stack.pg_dsn, app))
    victim = _pid(conn)
    pool.release("db", conn)
    with psycopg.connect(stack.pg_dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (victim,))
    wait_for(lambda: _app_connections(stack.pg_dsn, app) == 0, timeout=30, interval=0.05,
             what="the backend to end")
    fresh = pool.acquire("db", _connect(stack.pg_dsn, app))
    assert _pid(fresh) != victim  # the pass gets a working connection, not an error
    assert pool.connects == 2
    pool.release("db", fresh)
    pool.close_all()


def test_keys_are_separate_pools(stack: Any, app: str) -> None:
    pool = PgPool(1, wait_seconds=0.2)
    a = pool.acquire("a", _connect(stack.pg_dsn, app))
    b = pool.acquire("b", _connect(stack.pg_dsn, app))  # another database or role
    assert _pid(a) != _pid(b)
    pool.release("a", a)
    pool.release("b", b)
    assert pool.open_connections() == 2
    pool.close_all()
    assert pool.open_connections() == 0


def test_idle_connections_past_the_limit_close_but_the_one_a_pass_takes(stack: Any,
                                                                        app: str) -> None:
    now = [0.0]
    pool = PgPool(2, idle_seconds=300, clock=lambda: now[0])
    older = pool.acquire("db", _connect(stack.pg_dsn, app))
    newer = pool.acquire("db", _connect(stack.pg_dsn, app))
    kept = _pid(newer)
    pool.release("db", older)
    pool.release("db", newer)  # the most recently used
    now[0] = 301.0
    again = pool.acquire("db", _connect(stack.pg_dsn, app))
    assert again is newer and _pid(again) == kept  # pinged and reused, not closed and remade
    assert older.closed and pool.connects == 2
    assert _app_connections(stack.pg_dsn, app) == 1
    pool.release("db", again)
    pool.close_all()


def test_an_idle_connection_of_a_key_no_pass_asks_for_expires_too(stack: Any, app: str) -> None:
    now = [0.0]
    pool = PgPool(2, idle_seconds=300, clock=lambda: now[0])
    old = pool.acquire("before-rotation", _connect(stack.pg_dsn, app))
    pool.release("before-rotation", old)
    now[0] = 301.0
    new = pool.acquire("after-rotation", _connect(stack.pg_dsn, app))  # a rotated password
    assert old.closed
    assert _app_connections(stack.pg_dsn, app) == 1
    pool.release("after-rotation", new)
    pool.close_all()


def test_a_waiter_is_woken_by_its_own_key_while_another_key_waits(stack: Any, app: str) -> None:
    pool = PgPool(1, wait_seconds=60)
    held = {k: pool.acquire(k, _connect(stack.pg_dsn, app)) for k in ("a", "b")}
    got: dict[str, Any] = {}
    waiters = [threading.Thread(target=lambda k=k: got.__setitem__(
        k, pool.acquire(k, _connect(stack.pg_dsn, app)))) for k in ("a", "b")]
    for waiter in waiters:
        waiter.start()
    # threading.Condition keeps its waiters in _waiters (CPython): both passes are blocked
    wait_for(lambda: len(pool._cond._waiters) == 2,  # type: ignore[attr-defined]
             timeout=30, interval=0.01, what="both passes to wait")
    pool.release("b", held["b"])
    waiters[1].join(timeout=30)
    assert "b" in got  # woken although a waiter of "a" may have been told first
    pool.release("a", held["a"])
    waiters[0].join(timeout=30)
    assert "a" in got
    for key, conn in got.items():
        pool.release(key, conn)
    pool.close_all()
