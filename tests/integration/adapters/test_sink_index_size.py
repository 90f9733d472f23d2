"""The room an index takes, as `dv plan` reads it through the sink Secret's keys: a real
PostgreSQL table and a real OpenSearch index, bounded below by the bytes written (random hex:
no compression stores it in fewer bytes than half its characters) and growing with more."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from opensearchpy import OpenSearch

from derived_views.adapters.sink import index_bytes
from derived_views.adapters.sink_contract import SinkSecretInvalid, SinkUnavailable

pytestmark = pytest.mark.integration

ROWS = 2000
HEX_CHARS = 400
"""Per row: 200 random bytes as hex; no store keeps them in fewer than 200 bytes."""
DEADLINE_SECONDS = 30.0


def pg_secret(stack: Any) -> dict[str, str]:
    dsn = dict(item.split("=", 1) for item in stack.pg_dsn.split())
    return {"host": dsn["host"], "port": dsn["port"], "database": dsn["dbname"],
            "user": dsn["user"], "password": dsn["password"]}


def random_hex() -> str:
    return os.urandom(HEX_CHARS // 2).hex()


def grows(read: Callable[[], int | None], than: int) -> int:
    """The size once it exceeds `than`, read until the deadline."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        size = read()
        if size is not None and size > than:
            return size
        if time.monotonic() > deadline:
            pytest.fail(f"the size stayed {size}, not above {than}, for {DEADLINE_SECONDS} s")
        time.sleep(0.2)


def test_a_postgres_tables_size(conn: psycopg.Connection[Any], schema: str,
                                stack: Any) -> None:
    table = "acct__aaaa000001"
    conn.execute(f'CREATE TABLE "{schema}"."{table}" (id int PRIMARY KEY, payload text)')
    insert = f'INSERT INTO "{schema}"."{table}" VALUES (%s, %s)'
    with conn.cursor() as cur:
        cur.executemany(insert, [(i, random_hex()) for i in range(ROWS)])
    secret = pg_secret(stack)

    def read() -> int | None:
        return index_bytes("postgres", secret, schema, table, 5)

    first = read()
    assert first is not None and first > ROWS * HEX_CHARS // 2
    with conn.cursor() as cur:
        cur.executemany(insert, [(i, random_hex()) for i in range(ROWS, 2 * ROWS)])
    assert grows(read, first + ROWS * HEX_CHARS // 2) > first
    assert index_bytes("postgres", secret, schema, "acct__absent0001", 5) is None
    assert index_bytes("postgres", secret, "no_such_schema", table, 5) is None


def test_an_unreachable_or_unusable_postgres_is_said_not_raised_as_anything_else(
        stack: Any) -> None:
    secret = {**pg_secret(stack), "host": "127.0.0.1", "port": "1"}
    started = time.monotonic()
    with pytest.raises(SinkUnavailable, match=r"cannot connect to 127\.0\.0\.1:1/"):
        index_bytes("postgres", secret, "public", "acct__aaaa000001", 2)
    assert time.monotonic() - started < 10
    with pytest.raises(SinkSecretInvalid, match="missing key"):
        index_bytes("postgres", {"host": "x"}, "public", "acct__aaaa000001", 2)


def test_an_opensearch_indexs_size(search: OpenSearch, base: str, stack: Any) -> None:
    index = f"{base}__aaaa000001"
    search.indices.create(index=index, body={"settings": {"number_of_replicas": 0}})

    def add(start: int) -> None:
        lines: list[dict[str, Any]] = []
        for i in range(start, start + ROWS):
            lines += [{"index": {"_index": index, "_id": str(i)}}, {"payload": random_hex()}]
        answer = search.bulk(body=lines, params={"refresh": "true"})
        assert not answer["errors"]

    add(0)
    secret = {"url": stack.opensearch}

    def read() -> int | None:
        return index_bytes("opensearch", secret, "", index, 5)

    first = grows(read, ROWS * HEX_CHARS // 2)
    add(ROWS)
    assert grows(read, first) > first
    assert index_bytes("opensearch", secret, "", f"{base}__absent0001", 5) is None


def test_an_unreachable_opensearch_is_said(stack: Any) -> None:
    started = time.monotonic()
    with pytest.raises(SinkUnavailable, match=r"reading the size of index x__aaaa000001 at "
                                              r"http://127\.0\.0\.1:1"):
        index_bytes("opensearch", {"url": "http://127.0.0.1:1"}, "", "x__aaaa000001", 2)
    assert time.monotonic() - started < 10
