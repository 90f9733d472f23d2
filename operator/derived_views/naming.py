"""Names derived from a view and a revision, within PostgreSQL's and Kubernetes' limits."""

from __future__ import annotations

import hashlib
import re

PG_MAX = 63
DNS_LABEL_MAX = 63


def index_table(base: str, revision: str) -> str:
    """`<base>__<revision>`; the CRD caps base at 40 chars so this always fits 63."""
    name = f"{base}__{revision}"
    if len(name.encode()) > PG_MAX:
        raise ValueError(f"index name {name!r} exceeds PostgreSQL's {PG_MAX}-byte limit")
    return name


def spark_application(view: str, revision: str) -> str:
    """`<view>-<revision>`, shortened with a hash of the view name if over 63 chars."""
    name = f"{view}-{revision}"
    if len(name) <= DNS_LABEL_MAX:
        return name
    digest = hashlib.sha256(view.encode()).hexdigest()[:6]
    keep = DNS_LABEL_MAX - len(revision) - len(digest) - 2
    head = re.sub(r"-+$", "", view[:keep])
    return f"{head}-{digest}-{revision}"


def checkpoint(base: str, namespace: str, view: str, revision: str) -> str:
    """One checkpoint per revision: a rollback resumes exactly where it stopped."""
    return f"{base.rstrip('/')}/{namespace}/{view}/{revision}"
