"""The pinned Spark Operator CRD is fetched once; later runs use the cached copy without go."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dvstack.settings import load
from dvstack.spark import crd as spark_crd


def test_a_cached_crd_needs_no_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = dataclasses.replace(load(), cache_dir=tmp_path)
    cached = tmp_path / f"spark-operator-{spark_crd.VERSION}" / spark_crd.CRD_FILE
    cached.parent.mkdir(parents=True)
    cached.write_text("kind: CustomResourceDefinition\n")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert spark_crd.sparkapplications_crd(settings) == cached


def test_without_go_the_error_says_what_to_install(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    settings = dataclasses.replace(load(), cache_dir=tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SystemExit, match="install Go"):
        spark_crd.sparkapplications_crd(settings)
