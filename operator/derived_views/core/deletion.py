"""Words for a deletion that could not clean everything: what is left, and how to drop it.

Deletion never waits forever on a dependency that is gone (a Secret, a database) or on
objects of others that depend on the alias: it releases the view and says, in an event
and the log, exactly which alias and tables stayed in PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterable

DELETION_BLOCKED = "DeletionBlocked"
LEFT_BEHIND = "LeftBehind"


def _quoted(schema: str, name: str) -> str:
    return '"{}"."{}"'.format(schema.replace('"', '""'), name.replace('"', '""'))


def left_behind(schema: str, alias: str, indexes: Iterable[str], ledger: str) -> str:
    """`left <what>; drop by hand: <SQL>` for the alias and index tables named."""
    tables = sorted(set(indexes))
    what = [f"alias view {schema}.{alias}", *(f"index table {schema}.{t}" for t in tables)]
    statements = [f"DROP VIEW IF EXISTS {_quoted(schema, alias)};",
                  *(f"DROP TABLE IF EXISTS {_quoted(schema, t)};" for t in tables)]
    text = f"left {', '.join(what)} (and their rows in {schema}.{ledger}) in PostgreSQL"
    return f"{text}; to drop them by hand: {' '.join(statements)}"


def dependents_text(blockers: Iterable[str]) -> str:
    shown = sorted(set(blockers))
    more = f" and {len(shown) - 5} more" if len(shown) > 5 else ""
    return ", ".join(shown[:5]) + more
