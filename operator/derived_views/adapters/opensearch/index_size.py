"""How much room a revision's index takes in OpenSearch, read for `dv plan`."""

from __future__ import annotations

from opensearchpy import NotFoundError, OpenSearch, TransportError
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError

from derived_views.adapters.opensearch.checks import message_line
from derived_views.adapters.opensearch.client import OpenSearchCredentials
from derived_views.adapters.sink_contract import SinkUnavailable


def store_bytes(client: OpenSearch, index: str, timeout_seconds: float) -> int | None:
    """The index's `store.size_in_bytes` over all its copies (primaries and replicas: what
    the cluster's disks hold); None when there is no such index."""
    try:
        stats = client.indices.stats(index=index, metric="store",
                                     params={"request_timeout": timeout_seconds})
    except NotFoundError:
        return None
    found = (stats.get("indices") or {}).get(index)
    return None if found is None else int(found["total"]["store"]["size_in_bytes"])


def read_store_bytes(creds: OpenSearchCredentials, index: str, timeout_seconds: float
                     ) -> int | None:
    """`store_bytes` with a client of its own; SinkUnavailable when the cluster does not
    answer within `timeout_seconds`."""
    client = creds.client(pool_size=1)
    try:
        return store_bytes(client, index, timeout_seconds)
    except (OpenSearchConnectionError, TransportError) as exc:
        raise SinkUnavailable(f"reading the size of index {index} at {creds.url} failed: "
                              f"{message_line(exc)}") from None
    finally:
        client.close()
