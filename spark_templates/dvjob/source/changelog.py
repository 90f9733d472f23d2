"""Refuse transforms that aggregate a Debezium changelog: they would count every version.

A `debezium` topic holds one event per change of a row, not one per row: a
row created and updated twice arrives three times.  A projection (one output
row per source row, keyed by the table's key, `_debezium_deleted AS
_dv_deleted`) mirrors the table because the last event per key wins.  An
aggregate (GROUP BY, sum/count over all events, DISTINCT, dropDuplicates) sees
every version and nothing subtracts the old one, so `sum(amount)` is silently
wrong after the first update.  The job checks Spark's analyzed plan, which sees
through SQL and Python transforms alike, and refuses at start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dvjob.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# Logical plan nodes that combine several input rows into one output row.
COMBINING_NODES = frozenset({"Aggregate", "Distinct", "Deduplicate", "DeduplicateWithinWatermark"})

DEBEZIUM_AGGREGATE_FIX = (
    "format debezium delivers every version of a row (create, each update, delete), so an "
    "aggregate counts old versions that nothing subtracts (sum(amount) grows with each "
    "update). Write a projection that mirrors the table instead, e.g. SELECT id, amount, "
    "_debezium_deleted AS _dv_deleted FROM events with primaryKey [id], and aggregate when "
    "reading: a PostgreSQL view over the alias (SELECT customer_id, sum(amount) FROM <alias> "
    "GROUP BY customer_id) is always current")


def combining_nodes(frame: DataFrame) -> list[str]:
    """Names of the combining nodes in the frame's analyzed logical plan, top down."""
    found: list[str] = []
    pending: list[Any] = [frame._jdf.queryExecution().analyzed()]
    while pending:
        node = pending.pop()
        name = str(node.nodeName())
        if name in COMBINING_NODES:
            found.append(name)
        children = node.children()
        pending.extend(children.apply(i) for i in range(children.size()))
    return found


def refuse_changelog_aggregates(output: DataFrame, fmt: str) -> None:
    """ConfigError naming why and what to write instead, for an aggregate over Debezium."""
    if fmt != "debezium":
        return
    nodes = combining_nodes(output)
    if nodes:
        raise ConfigError(f"transform: aggregates over a changelog are refused ({nodes[0]} in "
                          f"the query plan): {DEBEZIUM_AGGREGATE_FIX}")
