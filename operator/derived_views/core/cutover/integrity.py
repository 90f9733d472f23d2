"""Does a revision's index still hold what its ledger says it does?

The job commits each batch's rows together with a ledger row recording the
index table's identity (its OID), so the ledger's newest row is a claim: "this
table holds batches 0..N".  The claim is false once the table is gone, or is
another table under the same name (dropped and re-created: empty, or refilled
from batch N+1 on).  Such an index must never be promoted nor silently serve:
the planner rebuilds a candidate from offset 0 and reports an active one as
Degraded.  TRUNCATE keeps the OID; the job refuses it with a trigger on every
index table.  Pure: the caller passes the observation.
"""

from __future__ import annotations

from collections.abc import Mapping

from derived_views.core.observed import LedgerPosition


def lost_index_cause(index: str, position: LedgerPosition | None,
                     index_oids: Mapping[str, int | str] | None) -> str | None:
    """Why `index` no longer holds the batches its ledger claims; None when it does, when the
    ledger claims nothing, or when the tables were not observed (`index_oids` None)."""
    if position is None or index_oids is None:
        return None
    claim = ("the ledger holds its committed batches up to "
             f"{position.batch_id if position.batch_id is not None else 'some batch'}")
    live = index_oids.get(index)
    if live is None:
        return f"index table {index} is missing but {claim} (dropped?)"
    if position.index_oid is not None and position.index_oid != live:
        return (f"index table {index} is not the table {claim} were written to (identity "
                f"{live}, recorded {position.index_oid}): it was dropped and re-created")
    return None
