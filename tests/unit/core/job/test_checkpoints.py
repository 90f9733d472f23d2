"""Where checkpoints may live and how S3A reaches them (core.job.checkpoints)."""

from __future__ import annotations

import pytest

from derived_views.core.job.checkpoints import (
    belongs_to_revision,
    dropped_revision_location,
    durable_base_problem,
    revision_root,
    s3a_hadoop_conf,
    scheme,
    split_s3a,
)
from derived_views.core.naming import checkpoint_location


@pytest.mark.parametrize(("base", "expected"), [
    ("/tmp/derived-views/checkpoints", ""), ("relative/dir", ""), ("file:///data/ck", "file"),
    ("local:///opt/ck", "local"), ("S3A://Bucket/x", "s3a"), ("hdfs://nn:8020/ck", "hdfs"),
    ("gs://b/p", "gs"), ("abfss://c@acct.dfs.core.windows.net/p", "abfss"),
])
def test_scheme(base: str, expected: str) -> None:
    assert scheme(base) == expected


@pytest.mark.parametrize("base", ["/tmp/derived-views/checkpoints", "checkpoints",
                                  "file:///var/ck", "file:/var/ck", "local:///opt/ck",
                                  "FILE:///var/ck"])
def test_a_pod_local_base_is_refused_in_a_cluster_only(base: str) -> None:
    problem = durable_base_problem(base, in_cluster=True)
    assert problem is not None
    assert repr(base) in problem and "s3a://bucket/prefix" in problem
    assert durable_base_problem(base, in_cluster=False) is None


@pytest.mark.parametrize("base", ["s3a://derived-views/checkpoints", "hdfs://nn:8020/ck",
                                  "gs://bucket/ck", "abfss://c@a.dfs.core.windows.net/ck"])
def test_a_shared_store_is_accepted_everywhere(base: str) -> None:
    assert durable_base_problem(base, in_cluster=True) is None
    assert durable_base_problem(base, in_cluster=False) is None


def test_an_empty_base_is_a_problem_everywhere() -> None:
    assert durable_base_problem("  ", in_cluster=False) == "the checkpoint base is empty"


def test_split_s3a() -> None:
    assert split_s3a("s3a://bucket/a/b/") == ("bucket", "a/b")
    assert split_s3a("s3a://bucket") == ("bucket", "")
    with pytest.raises(ValueError, match="names no bucket"):
        split_s3a("s3a:///key")
    with pytest.raises(ValueError, match="not an s3a"):
        split_s3a("/tmp/x")


def test_hadoop_conf_for_a_non_aws_store_uses_path_style() -> None:
    assert s3a_hadoop_conf("http://minio:9000", None) == {
        "fs.s3a.endpoint": "http://minio:9000", "fs.s3a.path.style.access": "true"}
    assert s3a_hadoop_conf(None, "eu-west-1") == {"fs.s3a.endpoint.region": "eu-west-1"}
    assert s3a_hadoop_conf(None, None) == {}


def test_revision_root_cuts_the_rebuild_suffix_only() -> None:
    root = "s3a://b/ck/shop/orders/71250ff800"
    assert revision_root(root) == root
    assert revision_root(f"{root}.3") == root
    assert revision_root(f"{root}/") == root
    assert revision_root("/tmp/ck.d/shop/v.1/71250ff800.12") == "/tmp/ck.d/shop/v.1/71250ff800"


def test_what_belongs_to_a_revision() -> None:
    revision = "71250ff800"
    for name in (revision, f"{revision}.1", f"{revision}.stale-20261123T070507Z",
                 f"{revision}.2.stale-20261123T070507Z"):
        assert belongs_to_revision(name, revision), name
    for name in ("71250ff801", "71250ff8000", "x71250ff800", "71250ff80"):
        assert not belongs_to_revision(name, revision), name


def test_a_dropped_revision_uses_the_location_it_recorded() -> None:
    recorded = [("aaaaaaaaaa", "s3a://old/ck/shop/v/aaaaaaaaaa.2"),
                ("bbbbbbbbbb", "s3a://new/ck/shop/v/bbbbbbbbbb")]
    assert dropped_revision_location(recorded, None, "s3a://new/ck", "shop", "v",
                                     "aaaaaaaaaa") == "s3a://old/ck/shop/v/aaaaaaaaaa"
    # A pruned record: the base in force now (the view's own before the operator's).
    assert dropped_revision_location(recorded, "s3a://view/ck", "s3a://new/ck", "shop", "v",
                                     "cccccccccc") == \
        checkpoint_location("s3a://view/ck", "shop", "v", "cccccccccc")
    assert dropped_revision_location([], None, "s3a://new/ck", "shop", "v", "cccccccccc") == \
        "s3a://new/ck/shop/v/cccccccccc"
