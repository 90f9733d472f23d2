"""Fixtures shared by the Spark job's integration tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from dvjob.sinks.postgres.sink import Connect


@pytest.fixture
def connect(stack: Any) -> Connect:
    """Connections to the stack's PostgreSQL, as the job's sink opens them (its `dsn` too:
    the sink's executors connect with it)."""
    dsn: str = stack.pg_dsn

    def connect() -> psycopg.Connection[Any]:
        return psycopg.connect(dsn)
    connect.dsn = dsn  # type: ignore[attr-defined]
    return connect


@pytest.fixture
def schema(stack: Any) -> Iterator[str]:
    """A fresh PostgreSQL schema per test, dropped afterwards (the job creates its tables)."""
    name = f"dvjob_it_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
