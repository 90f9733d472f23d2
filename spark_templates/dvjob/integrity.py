"""Is the index table still the one the ledger's batches were written to?

The ledger row of each batch is committed with the batch's rows, so "the
ledger holds batches of this revision" means "the index holds their effects".
That stops being true when someone drops the table (and maybe re-creates it):
re-creating it empty and resuming at batch N would build an index that lacks
every row of batches 0..N-1 while looking complete.  Each ledger row records
the index table's identity (its pg_class OID) at commit; a table that is
missing, or has another OID, no longer holds those batches.  TRUNCATE keeps
the OID, so the job refuses TRUNCATE on index tables with a trigger instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from dvjob.errors import JobError


class IndexLostError(JobError):
    """The ledger says the index holds batches that the index table no longer holds."""


@dataclass(frozen=True)
class LedgerHead:
    """What the ledger says about one revision: its newest batch and that batch's table."""

    newest_batch: int | None
    """None: the ledger holds no batch of the revision."""
    index_oid: int | None
    """OID of the index table the newest batch was written to (None in ledgers from before
    identities were recorded)."""


def lost_index_cause(table: str, revision: str, head: LedgerHead, live_oid: int | None) -> str | None:
    """Why `table` cannot hold what the ledger claims (None: it can, or nothing is claimed)."""
    if head.newest_batch is None:
        return None
    claim = f"the ledger holds committed batches 0..{head.newest_batch} of revision {revision}"
    fix = ("refusing to write into it: the index would silently lack those batches' rows. "
           "The operator rebuilds the revision from offset 0 (a new build); by hand, delete "
           "the revision's ledger rows and its checkpoint and restart the job")
    if live_oid is None:
        return f"index table {table} is missing but {claim}: was it dropped? {fix}"
    if head.index_oid is not None and head.index_oid != live_oid:
        return (f"index table {table} is not the table its batches were written to (OID "
                f"{live_oid}, the ledger recorded {head.index_oid}) and {claim}: it was dropped "
                f"and re-created; {fix}")
    return None


def check_index(table: str, revision: str, head: LedgerHead, live_oid: int | None) -> None:
    cause = lost_index_cause(table, revision, head, live_oid)
    if cause is not None:
        raise IndexLostError(cause)
