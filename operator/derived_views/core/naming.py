"""Names derived from a view and a revision, within PostgreSQL's and Kubernetes' limits.

PostgreSQL silently truncates identifiers longer than 63 bytes, which could
make two revisions share a table, so index names are checked, never cut.
Kubernetes names used as labels and DNS labels must fit 63 characters, so
SparkApplication names are shortened with a hash that keeps them unique.
"""

from __future__ import annotations

import hashlib
import re

from derived_views.core.judges.tenancy import NAMESPACE_PLACEHOLDER
from derived_views.core.revision import REVISION_LENGTH

PG_IDENTIFIER_MAX_BYTES = 63
DNS_LABEL_MAX = 63
LEDGER_TABLE = "dv_ledger"
"""Ledger table of the Spark job (one per sink schema, shared by every revision of every view)."""


def progress_table(ledger: str) -> str:
    """Where each revision's running batch reports how far it has read, beside the ledger
    (the job's dvjob.sinks.postgres.sink.progress_table names the same table)."""
    return f"{ledger[:54]}_progress"


INDEX_SEPARATOR = "__"
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NAME_HASH_LENGTH = 6


def index_table(alias: str, revision: str) -> str:
    """`<alias>__<revision>`; the CRD caps the alias at 40 characters, so it fits 63 bytes."""
    name = f"{alias}{INDEX_SEPARATOR}{revision}"
    if len(name.encode("utf-8")) > PG_IDENTIFIER_MAX_BYTES:
        raise ValueError(f"index table {name!r} exceeds PostgreSQL's "
                         f"{PG_IDENTIFIER_MAX_BYTES}-byte identifier limit")
    return name


def index_revision(alias: str, table: str) -> str | None:
    """The revision an index table belongs to, or None if `table` is not one of this alias's."""
    prefix = f"{alias}{INDEX_SEPARATOR}"
    if not table.startswith(prefix):
        return None
    revision = table[len(prefix):]
    if len(revision) != REVISION_LENGTH or not all(c in "0123456789abcdef" for c in revision):
        return None
    return revision


def spark_application_name(view: str, revision: str) -> str:
    """`<view>-<revision>` as a DNS-1123 label of at most 63 characters.

    When the view name is too long, has characters a label cannot hold (dots)
    or does not start with a letter (Services derived from the name must),
    the view part is cut and a hash of the whole view name keeps it unique.
    """
    plain = f"{view}-{revision}"
    if len(plain) <= DNS_LABEL_MAX and _DNS_LABEL.match(plain):
        return plain
    digest = hashlib.sha256(view.encode("utf-8")).hexdigest()[:_NAME_HASH_LENGTH]
    cleaned = re.sub(r"[^a-z0-9-]+", "-", view.lower())
    room = DNS_LABEL_MAX - len(revision) - _NAME_HASH_LENGTH - 2
    head = cleaned[:room].strip("-")
    if not head or not head[0].isalpha():
        head = ("dv-" + head)[:room].strip("-")
    return f"{head}-{digest}-{revision}"


def job_namespace(template: str, namespace: str) -> str:
    """Where the jobs of a view in `namespace` run: `template` with `{namespace}` replaced,
    or the view's own namespace when there is no template. ValueError when the result is
    not a namespace name (a long view namespace can overflow 63 characters)."""
    if not template:
        return namespace
    name = template.replace(NAMESPACE_PLACEHOLDER, namespace)
    if len(name) > DNS_LABEL_MAX or not _NAMESPACE.match(name):
        raise ValueError(f"the job namespace of namespace {namespace} would be {name!r}, not a "
                         f"namespace name (a DNS label of at most {DNS_LABEL_MAX} "
                         "characters)")
    return name


def job_namespace_problem(template: str) -> str | None:
    """Why a DV_JOB_NAMESPACE template cannot be used; None when it can (or is empty).

    It must name one namespace per view namespace: a fixed name would put every tenant's
    jobs in one namespace, where each job's driver (which creates pods) could mount the
    Secrets copied there for another tenant's views."""
    if not template:
        return None
    if template.count(NAMESPACE_PLACEHOLDER) != 1:
        return (f"{template!r} must hold {NAMESPACE_PLACEHOLDER} exactly once (one job "
                "namespace per view namespace, e.g. {namespace}-dv-jobs)")
    try:
        job_namespace(template, "a")
    except ValueError:
        return f"{template!r} does not make namespace names (lower-case letters, digits, '-')"
    return None


SECRET_COPY_PREFIX = "dv-"


def secret_copy_name(view: str, secret: str) -> str:
    """The name, in a job namespace, of a view's Secret copied there: `dv-<view>-<secret>`,
    one per view (its jobs own it, so it goes with the last of them), at most 253
    characters with a hash when longer."""
    plain = f"{SECRET_COPY_PREFIX}{view}-{secret}"
    if len(plain) <= 253:
        return plain
    digest = hashlib.sha256(f"{view}/{secret}".encode()).hexdigest()[:_NAME_HASH_LENGTH]
    return f"{plain[:253 - _NAME_HASH_LENGTH - 1].rstrip('-.')}-{digest}"


def checkpoint_location(checkpoint_base: str, namespace: str, view: str, revision: str,
                        build: int = 0) -> str:
    """`<base>/<namespace>/<view>/<revision>`, with `.<build>` for rebuilds.

    A rollback resumes from the same location, so it must be a function of the
    view and the revision only. Once a revision's index has been dropped, its
    checkpoint still holds offsets (and aggregation state) that no longer match
    any rows, so rebuilding it from offset 0 needs a location never used before.
    """
    if build < 0:
        raise ValueError(f"build must be >= 0, not {build}")
    location = f"{checkpoint_base.rstrip('/')}/{namespace}/{view}/{revision}"
    return location if build == 0 else f"{location}.{build}"
