"""Deleting a dropped revision's checkpoints, on the stack's S3 store and on a local directory."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.config import Config

from derived_views.adapters.checkpoints import (
    CheckpointStoreError,
    S3Access,
    delete_dropped_revision,
    delete_revision_checkpoints,
)
from derived_views.adapters.kube.client import Kube
from derived_views.core.job.checkpoints import dropped_revision_location
from derived_views.core.settings import CheckpointSettings, Settings, SparkSettings
from dvstack.testing import replay

REVISION, OTHER = "71250ff800", "71250ff801"
# Paths under <base>/<ns>/<view>/: what the job and the planner write there.
GOES = [f"{REVISION}/commits/0", f"{REVISION}/offsets/0", f"{REVISION}/state/0/0/1.delta",
        f"{REVISION}.stale-20261123T070507Z/commits/0", f"{REVISION}.1/metadata",
        f"{REVISION}.1.stale-20261124T000000Z/offsets/3"]
STAYS = [f"{OTHER}/commits/0", f"{REVISION}0/x"]


def s3(stack: Any) -> Any:
    info = stack.s3
    return botocore.session.get_session().create_client(
        "s3", region_name=info["region"], endpoint_url=info["endpoint"],
        aws_access_key_id=info["access_key"], aws_secret_access_key=info["secret_key"],
        config=Config(s3={"addressing_style": "path"}))


def access(stack: Any) -> S3Access:
    info = stack.s3
    return S3Access(info["access_key"], info["secret_key"], info["endpoint"], info["region"])


def keys(stack: Any, prefix: str) -> set[str]:
    client = s3(stack)
    return {o["Key"][len(prefix):] for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=stack.s3["bucket"], Prefix=prefix) for o in page.get("Contents") or []}


def put(stack: Any, prefix: str, names: list[str]) -> None:
    client = s3(stack)
    for name in names:
        client.put_object(Bucket=stack.s3["bucket"], Key=f"{prefix}{name}", Body=b"x")
    # Directory markers, as S3A leaves them: one of an empty directory, one with contents
    # (written before them, as Spark's state store does).
    client.put_object(Bucket=stack.s3["bucket"], Key=f"{prefix}{REVISION}/sources/", Body=b"")
    client.put_object(Bucket=stack.s3["bucket"], Key=f"{prefix}{REVISION}/state/0/0/_metadata/",
                      Body=b"")
    client.put_object(Bucket=stack.s3["bucket"],
                      Key=f"{prefix}{REVISION}/state/0/0/_metadata/schema", Body=b"x")


def test_s3_deletes_the_revision_its_rebuilds_and_stale_copies_only(stack: Any) -> None:
    base = f"it-ckpt/{uuid.uuid4().hex[:10]}"
    prefix = f"{base}/shop/orders/"
    put(stack, prefix, GOES + STAYS)
    put(stack, f"{base}/shop/orders-2/", [f"{REVISION}/commits/0"])  # another view
    gone = delete_revision_checkpoints(f"s3a://{stack.s3['bucket']}/{prefix}{REVISION}",
                                       access(stack))
    assert gone >= len(GOES) + 1
    left = {k for k in keys(stack, prefix) if not k.endswith("/")}
    assert left == set(STAYS)
    assert keys(stack, f"{base}/shop/orders-2/{REVISION}/commits/") == {"0"}
    # Again: nothing left to delete, no error.
    assert delete_revision_checkpoints(f"s3a://{stack.s3['bucket']}/{prefix}{REVISION}",
                                       access(stack)) == 0


def test_s3_with_wrong_credentials_is_one_line_naming_the_location(stack: Any) -> None:
    wrong = S3Access("nobody", "wrong", stack.s3["endpoint"], stack.s3["region"])
    with pytest.raises(CheckpointStoreError) as caught:
        delete_revision_checkpoints(f"s3a://{stack.s3['bucket']}/x/{REVISION}", wrong)
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith(f"s3a://{stack.s3['bucket']}/x/{REVISION}: ")


def test_a_local_directory_is_deleted_the_same_way(tmp_path: Path) -> None:
    view = tmp_path / "shop" / "orders"
    for name in GOES + STAYS:
        (view / name).parent.mkdir(parents=True, exist_ok=True)
        (view / name).write_text("x")
    assert delete_revision_checkpoints(str(view / REVISION)) == 4
    assert sorted(str(p.relative_to(view)) for p in view.rglob("*") if p.is_file()) == \
        sorted(STAYS)
    assert delete_revision_checkpoints(f"file://{view / OTHER}") == 1
    assert delete_revision_checkpoints(str(tmp_path / "nothing" / "here" / REVISION)) == 0


def test_other_stores_are_refused_with_what_to_do() -> None:
    with pytest.raises(CheckpointStoreError, match=r"hdfs://.*store's tools"):
        delete_revision_checkpoints(f"hdfs://nn:8020/ck/shop/orders/{REVISION}")


def planned_location(namespace: str, base: str) -> str:
    """Where the plan's DropIndex says the revision's checkpoints are: status recorded its
    rebuild `<revision>.1`; the drop names the build-0 location (core.job.checkpoints)."""
    return dropped_revision_location(
        [(REVISION, f"{base}/{namespace}/orders/{REVISION}.1")], None, "/unused", namespace,
        "orders", REVISION)


def test_after_drop_index_the_operator_deletes_with_the_views_secret(
        stack: Any, kube_api_client: Any, namespace: str) -> None:
    """What reconcile does after DropIndex: the planned location, the namespace's Secret."""
    from kubernetes import client

    base_key = f"it-drop/{uuid.uuid4().hex[:10]}"
    base = f"s3a://{stack.s3['bucket']}/{base_key}"
    prefix = f"{base_key}/{namespace}/orders/"
    put(stack, prefix, GOES + STAYS)
    config = Settings(spark=SparkSettings(template="", image="x"), checkpoints=CheckpointSettings(base=base, secret=replay.CHECKPOINT_SECRET, s3_endpoint=stack.s3["endpoint"], s3_region=stack.s3["region"]))
    kube = Kube(kube_api_client)
    replay.ensure_checkpoint_secret(client.CoreV1Api(kube_api_client), namespace, stack.s3)
    delete_dropped_revision(kube, config, namespace, "orders", REVISION,
                            planned_location(namespace, base))
    assert {k for k in keys(stack, prefix) if not k.endswith("/")} == set(STAYS)


def test_a_missing_secret_leaves_the_checkpoints_with_a_warning(
        stack: Any, kube_api_client: Any, namespace: str,
        caplog: pytest.LogCaptureFixture) -> None:
    base_key = f"it-drop/{uuid.uuid4().hex[:10]}"
    base = f"s3a://{stack.s3['bucket']}/{base_key}"
    prefix = f"{base_key}/{namespace}/orders/"
    put(stack, prefix, GOES)
    config = Settings(spark=SparkSettings(template="", image="x"), checkpoints=CheckpointSettings(base=base, secret="no-such-secret", s3_endpoint=stack.s3["endpoint"]))
    with caplog.at_level(logging.WARNING, logger="derived_views"):
        delete_dropped_revision(Kube(kube_api_client), config, namespace, "orders", REVISION,
                                planned_location(namespace, base))
    assert f"secret {namespace}/no-such-secret not found" in caplog.text
    assert {k for k in keys(stack, prefix) if not k.endswith("/")} == \
        {*GOES, f"{REVISION}/state/0/0/_metadata/schema"}
