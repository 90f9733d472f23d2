"""Which adapter serves a view's sink kind: the registry of sink sessions.

A sink is a module implementing `sink_contract.SinkSession`, registered in
`open_session`: a new sink is a new module plus one line here, not edits across
the operator. The contract lives in `sink_contract`, which the sessions import;
this module imports the sessions, so the two never import each other.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import replace

from derived_views.adapters.sink_contract import SinkPools, SinkSecretInvalid, SinkSession
from derived_views.api.spec import DerivedViewSpec
from derived_views.core.check_runs import CheckKind, CheckRequest
from derived_views.core.cutover.checks import Measurement
from derived_views.core.settings import Settings

SINK_KINDS = ("postgres", "opensearch")


def open_session(spec: DerivedViewSpec, secret_data: Mapping[str, str],
                 settings: Settings, pools: SinkPools) -> SinkSession:
    """A session on the view's sink with its Secret's data, on a pooled connection.

    Raises SinkSecretInvalid (unusable data) or SinkUnavailable (cannot connect).
    """
    kind = spec.sink.kind
    if kind == "postgres":
        from derived_views.adapters.postgres.session import PostgresSession
        return PostgresSession.open(secret_data, settings, pools)
    if kind == "opensearch":
        from derived_views.adapters.opensearch.session import OpenSearchSession
        return OpenSearchSession.open(secret_data, settings, pools)
    raise SinkSecretInvalid(f"sink kind {kind!r}: this operator serves {', '.join(SINK_KINDS)}")


def diff_indexes(kind: str, secret_data: Mapping[str, str], request: CheckRequest,
                 address: str | None = None) -> tuple[Measurement, float]:
    """The request's diff check measured now, outside a pass (`dv diff`): a connection of its
    own, the check's transaction and timeout as the operator runs it. `address` (host:port)
    stands in for the Secret's, e.g. a `kubectl port-forward` from where the CLI runs.

    Raises SinkSecretInvalid (unusable data) or SinkUnavailable (cannot connect)."""
    host, _, port = (address or "").rpartition(":")
    if address is not None and (not host or not port.isdigit()):
        raise SinkSecretInvalid(f"--sink-address {address!r} is not HOST:PORT")
    if kind == "postgres":
        from derived_views.adapters.postgres.checks import run_sql_checks
        from derived_views.adapters.postgres.sink import PgConnection
        try:
            creds = PgConnection.from_secret_data(secret_data)
        except ValueError as exc:
            raise SinkSecretInvalid(str(exc)) from None
        if address is not None:
            creds = replace(creds, host=host, port=int(port))
        with creds.connect(autocommit=True) as conn:
            return run_sql_checks(conn, request, creds.check_role)[CheckKind.DIFF.value]
    if kind == "opensearch":
        from derived_views.adapters.opensearch.checks import run_query_checks
        from derived_views.adapters.opensearch.client import OpenSearchCredentials
        try:
            search = OpenSearchCredentials.from_secret_data(secret_data)
        except ValueError as exc:
            raise SinkSecretInvalid(str(exc)) from None
        if address is not None:
            parts = urllib.parse.urlsplit(search.url)
            search = replace(search, url=parts._replace(netloc=address).geturl())
        opened = search.client(pool_size=2)
        try:
            return run_query_checks(opened, request)[CheckKind.DIFF.value]
        finally:
            opened.close()
    raise SinkSecretInvalid(f"sink kind {kind!r}: this operator serves {', '.join(SINK_KINDS)}")


def index_bytes(kind: str, secret_data: Mapping[str, str], schema: str, index: str,
                timeout_seconds: int) -> int | None:
    """The room an index takes in the sink now (None: there is no such index), read-only on a
    connection of its own, each step within `timeout_seconds` (`dv plan`): PostgreSQL's total
    relation size of the table, OpenSearch's store size of the index.

    Raises SinkSecretInvalid (unusable data) or SinkUnavailable (no answer in time)."""
    if kind == "postgres":
        from derived_views.adapters.postgres.index_size import read_table_bytes
        from derived_views.adapters.postgres.sink import PgConnection
        try:
            creds = PgConnection.from_secret_data(secret_data)
        except ValueError as exc:
            raise SinkSecretInvalid(str(exc)) from None
        return read_table_bytes(creds, schema, index, timeout_seconds)
    if kind == "opensearch":
        from derived_views.adapters.opensearch.client import OpenSearchCredentials
        from derived_views.adapters.opensearch.index_size import read_store_bytes
        try:
            search = OpenSearchCredentials.from_secret_data(secret_data)
        except ValueError as exc:
            raise SinkSecretInvalid(str(exc)) from None
        return read_store_bytes(search, index, timeout_seconds)
    raise SinkSecretInvalid(f"sink kind {kind!r}: this operator serves {', '.join(SINK_KINDS)}")
