"""A fresh PostgreSQL schema for a test, dropped with everything in it afterwards."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import psycopg


@contextlib.contextmanager
def fresh_schema(dsn: str) -> Iterator[str]:
    name = f"it_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')
