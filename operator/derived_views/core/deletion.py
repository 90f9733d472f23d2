"""Words for a deletion that could not clean everything: what is left, and how to drop it.

Deletion never waits forever on a dependency that is gone (a Secret, a database) or on
objects of others that depend on the alias: it releases the view and says, in an event
and the log, exactly which alias and indexes stayed in the sink, and how to drop them there.
"""

from __future__ import annotations

from collections.abc import Iterable


def _quoted(schema: str, name: str) -> str:
    return '"{}"."{}"'.format(schema.replace('"', '""'), name.replace('"', '""'))


def left_behind(kind: str, schema: str, alias: str, indexes: Iterable[str], ledger: str) -> str:
    """`left <what>; drop by hand: <how>` for the alias and indexes named, in the words of
    the sink (`kind`): SQL for PostgreSQL, REST requests for OpenSearch."""
    tables = sorted(set(indexes))
    if kind == "opensearch":
        kept = [f"alias {alias}", *(f"index {t}" for t in tables)]
        how = (f"DELETE /{','.join(tables)} (an alias goes with its indexes)" if tables
               else f"POST /_aliases {{\"actions\": [{{\"remove\": {{\"index\": \"*\", "
                    f"\"alias\": \"{alias}\"}}}}]}}")
        return (f"left {', '.join(kept)} (and their entries in index {ledger}) in OpenSearch; "
                f"to drop them by hand: {how}")
    what = [f"alias view {schema}.{alias}", *(f"index table {schema}.{t}" for t in tables)]
    statements = [f"DROP VIEW IF EXISTS {_quoted(schema, alias)};",
                  *(f"DROP TABLE IF EXISTS {_quoted(schema, t)};" for t in tables)]
    text = f"left {', '.join(what)} (and their rows in {schema}.{ledger}) in PostgreSQL"
    return f"{text}; to drop them by hand: {' '.join(statements)}"


def dependents_text(blockers: Iterable[str]) -> str:
    shown = sorted(set(blockers))
    more = f" and {len(shown) - 5} more" if len(shown) > 5 else ""
    return ", ".join(shown[:5]) + more
