"""The stack's OpenSearch is the pinned single node and serves the sink's basic round trip."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from dvstack.settings import OPENSEARCH_VERSION


@pytest.fixture()
def client(stack: Any) -> Iterator[OpenSearch]:
    assert stack.opensearch, "stack.json has no `opensearch`: run `dvstack up` again"
    os_client = OpenSearch(hosts=[stack.opensearch], timeout=30)
    yield os_client
    os_client.close()


def test_pinned_version_on_one_node(client: OpenSearch) -> None:
    info = client.info()
    assert info["version"]["number"] == OPENSEARCH_VERSION
    health = client.cluster.health(wait_for_status="yellow")
    assert health["number_of_nodes"] == 1
    assert health["status"] in ("yellow", "green")


def test_index_and_search_round_trip(client: OpenSearch) -> None:
    index = f"t-{uuid.uuid4().hex[:10]}"
    client.indices.create(index=index, body={
        "settings": {"number_of_shards": 1, "number_of_replicas": 0},
        "mappings": {"properties": {"owner": {"type": "keyword"},
                                    "balance": {"type": "long"}}}})
    try:
        client.index(index=index, id="a1", body={"owner": "ada", "balance": 10})
        client.index(index=index, id="a2", body={"owner": "bob", "balance": 20}, refresh=True)
        hits = client.search(index=index, body={"query": {"term": {"owner": "bob"}}})["hits"]
        assert hits["total"]["value"] == 1
        assert hits["hits"][0]["_id"] == "a2"
        assert hits["hits"][0]["_source"] == {"owner": "bob", "balance": 20}
    finally:
        client.indices.delete(index=index)
