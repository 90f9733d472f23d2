"""Delete a dropped revision's checkpoints: on S3 (s3a://) or on a local filesystem.

Once a revision's index is dropped its checkpoints hold offsets (and aggregation
state) that match no rows: a rebuild uses a fresh location, so they are only
garbage. They are `<base>/<ns>/<view>/<revision>`, its rebuilds
`<revision>.<build>`, and the `.stale-<time>` copies the job set aside
(`naming.checkpoint_location`, `dvjob.checkpoint.stale_location`).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from derived_views.adapters.kube.client import SecretMissing
from derived_views.api.constants import MANAGED_BY, MANAGED_BY_LABEL
from derived_views.core.job import checkpoints
from derived_views.core.settings import Settings

log = logging.getLogger("derived_views")

DELETE_BATCH = 1000
"""DeleteObjects takes at most 1000 keys."""
DEFAULT_REGION = "us-east-1"


class CheckpointStoreError(Exception):
    """The checkpoint store refused or could not be reached; the message says which."""


@dataclass(frozen=True)
class S3Access:
    """How to reach the store: None fields fall back to the AWS SDK's defaults
    (environment, web identity, instance metadata)."""

    access_key_id: str | None = None
    secret_access_key: str | None = None
    endpoint: str | None = None
    region: str | None = None

    @staticmethod
    def from_secret_data(data: Mapping[str, str], endpoint: str | None,
                         region: str | None) -> S3Access:
        missing = [k for k in checkpoints.SECRET_KEYS if not data.get(k)]
        if missing:
            raise ValueError(f"the checkpoint Secret lacks {', '.join(missing)}")
        return S3Access(data[checkpoints.ACCESS_KEY_ID], data[checkpoints.SECRET_ACCESS_KEY],
                        endpoint, region)


def s3_client(access: S3Access) -> Any:
    """A botocore S3 client; a non-AWS endpoint gets path-style addressing like S3A's.

    botocore is imported here, not with the module: it costs the operator about 23 MB of
    memory, and only views checkpointing to s3a:// that are deleted or retired need it.
    """
    import botocore.session
    from botocore.config import Config

    config = Config(s3={"addressing_style": "path"} if access.endpoint else {},
                    connect_timeout=5, read_timeout=30, retries={"max_attempts": 3})
    return botocore.session.get_session().create_client(
        "s3", region_name=access.region or DEFAULT_REGION, endpoint_url=access.endpoint,
        aws_access_key_id=access.access_key_id, aws_secret_access_key=access.secret_access_key,
        config=config)


def delete_revision_checkpoints(location: str, access: S3Access | None = None) -> int:
    """Remove everything of the revision whose build-0 checkpoint is `location`
    (`<base>/<ns>/<view>/<revision>`): itself, its rebuilds and their `.stale-*` copies.
    Returns how many objects (S3) or directories (filesystem) went."""
    kind = checkpoints.scheme(location)
    if kind == checkpoints.S3A:
        return _delete_s3(location, access or S3Access())
    if kind in ("", "file"):
        return _delete_local(location)
    raise CheckpointStoreError(f"cannot delete checkpoints on {kind}:// (only s3a:// and "
                               "local paths are supported); remove them with the store's tools")


def _delete_s3(location: str, access: S3Access) -> int:
    bucket, key = checkpoints.split_s3a(location)
    parent, _, revision = key.rpartition("/")
    parent_prefix = f"{parent}/" if parent else ""
    from botocore.exceptions import BotoCoreError, ClientError

    client = s3_client(access)
    try:
        keys = []
        for page in client.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=f"{parent_prefix}{revision}"):
            for obj in page.get("Contents") or []:
                name = obj["Key"][len(parent_prefix):].split("/", 1)[0]
                if checkpoints.belongs_to_revision(name, revision):
                    keys.append(obj["Key"])
        # Every key before its prefixes: a directory marker (`dir/`) goes after what is in it,
        # as stores that keep directories as such refuse to delete one that is not empty.
        keys.sort(reverse=True)
        for start in range(0, len(keys), DELETE_BATCH):
            batch = keys[start:start + DELETE_BATCH]
            result = client.delete_objects(Bucket=bucket, Delete={
                "Objects": [{"Key": k} for k in batch], "Quiet": True})
            errors = result.get("Errors") or []
            if errors:
                first = errors[0]
                raise CheckpointStoreError(
                    f"s3a://{bucket}/{first.get('Key')}: {first.get('Code')} "
                    f"{first.get('Message')} ({len(errors)} object(s) not deleted)")
    except (BotoCoreError, ClientError) as exc:
        raise CheckpointStoreError(f"s3a://{bucket}/{key}: {exc}") from None
    finally:
        client.close()
    return len(keys)


def _delete_local(location: str) -> int:
    path = Path(location.removeprefix("file://").removeprefix("file:"))
    if not path.parent.is_dir():
        return 0
    gone = 0
    for entry in sorted(path.parent.iterdir()):
        if checkpoints.belongs_to_revision(entry.name, path.name):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
            gone += 1
    return gone


class SecretReader(Protocol):
    """What reading the checkpoint Secret needs of Kubernetes (adapters.kube.client.Kube)."""

    def secret(self, namespace: str, name: str) -> tuple[dict[str, str], dict[str, str]]: ...

    def secret_data(self, namespace: str, name: str) -> dict[str, str]: ...


def checkpoint_secret_data(kube: SecretReader, settings: Settings, namespace: str
                           ) -> dict[str, str]:
    """The checkpoint credentials the jobs of views in `namespace` use (SecretMissing when
    there are none)."""
    assert settings.checkpoints.secret is not None
    jobs = settings.jobs_of(namespace)
    if jobs == namespace:
        return kube.secret_data(namespace, settings.checkpoints.secret)
    try:
        data, labels = kube.secret(jobs, settings.checkpoints.secret)
        if labels.get(MANAGED_BY_LABEL) != MANAGED_BY:
            return data  # the platform's own, scoped to this job namespace
    except SecretMissing:
        pass
    return kube.secret_data(settings.jobs.operator_namespace, settings.checkpoints.secret)


def delete_dropped_revision(kube: SecretReader, settings: Settings, namespace: str, view: str,
                            revision: str, location: str) -> None:
    """After the revision's index is dropped: delete its checkpoints at `location` (its
    build-0 location, planned with the drop: DropIndex.checkpoints) with the operator's own
    credentials: the checkpoint Secret in the view's namespace, or, where jobs run in a job
    namespace, the platform's there (else the operator's own, the one it copies). A failure
    is logged, never raised: the index is already gone and a leftover checkpoint is only
    wasted space."""
    try:
        access = None
        if checkpoints.is_s3a(location):
            access = S3Access(endpoint=settings.checkpoints.s3_endpoint,
                              region=settings.checkpoints.s3_region)
            if settings.checkpoints.secret:
                access = S3Access.from_secret_data(
                    checkpoint_secret_data(kube, settings, namespace),
                    settings.checkpoints.s3_endpoint, settings.checkpoints.s3_region)
        gone = delete_revision_checkpoints(location, access)
    except (CheckpointStoreError, SecretMissing, ValueError, OSError) as exc:
        log.warning("%s/%s: checkpoints of revision %s left in place: %s", namespace, view,
                    revision, exc)
        return
    log.info("%s/%s: deleted %d checkpoint object(s) under %s", namespace, view, gone, location)
