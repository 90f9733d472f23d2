"""PostgreSQL fixtures of the adapter tests: a fresh schema per test, and a connection."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest


@pytest.fixture()
def schema(stack: Any) -> Iterator[str]:
    name = f"it_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    yield name
    with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{name}" CASCADE')


@pytest.fixture()
def conn(stack: Any) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(stack.pg_dsn, autocommit=True) as c:
        yield c
