"""A revision is the content hash of the spec fields that change the view's rows.

Connection details (bootstrap servers, secret names), Spark resources, the
cutover policy and the deletion policy are deliberately excluded: changing
them must never trigger a replay from genesis.  The bootstrap servers are a
connection detail too — the same topics on a renamed listener hold the same
log.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from derived_views.resource.spec import DerivedViewSpec

REVISION_LENGTH = 10


def content_of(spec: DerivedViewSpec) -> dict[str, Any]:
    return {
        "topics": sorted(spec.source.topics),
        "format": spec.source.format.value,
        "schema": " ".join(spec.source.schema_.split()),
        "transform": spec.transform.model_dump(mode="json", exclude_none=True),
        "sink": {"table": spec.sink.postgres.table, "schema": spec.sink.postgres.schema_,
                 "primaryKey": list(spec.sink.primaryKey)},
    }


def revision_of(spec: DerivedViewSpec) -> str:
    canonical = json.dumps(content_of(spec), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:REVISION_LENGTH]
