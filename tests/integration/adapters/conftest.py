"""Fixtures of the adapter tests: PostgreSQL (a fresh schema per test, a connection) and
OpenSearch (a client, and a fresh index-name base whose indexes are deleted afterwards)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from opensearchpy import OpenSearch

from support.pg_schemas import fresh_schema


@pytest.fixture()
def schema(stack: Any) -> Iterator[str]:
    with fresh_schema(stack.pg_dsn) as name:
        yield name


@pytest.fixture()
def conn(stack: Any) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(stack.pg_dsn, autocommit=True) as c:
        yield c


@pytest.fixture()
def search(stack: Any) -> Iterator[OpenSearch]:
    client = OpenSearch(hosts=[stack.opensearch], timeout=30)
    yield client
    client.close()


@pytest.fixture()
def base(search: OpenSearch) -> Iterator[str]:
    """A name no other test uses; every index `<base>__*` is deleted after the test."""
    name = f"it-{uuid.uuid4().hex[:8]}"
    yield name
    search.indices.delete(index=f"{name}__*", params={"ignore_unavailable": "true"})
