"""Which adapter serves a view's sink kind: the registry of sink sessions.

A sink is a module implementing `sink_contract.SinkSession`, registered in
`open_session`: a new sink is a new module plus one line here, not edits across
the operator. The contract lives in `sink_contract`, which the sessions import;
this module imports the sessions, so the two never import each other.
"""

from __future__ import annotations

from collections.abc import Mapping

from derived_views.adapters.sink_contract import SinkPools, SinkSecretInvalid, SinkSession
from derived_views.api.spec import DerivedViewSpec
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
