"""What a test hands the shell (`reconcile.deps.Deps`), built in one place: the one Kubernetes
fake unless a test brings a real client, an end-offsets cache that asks no Kafka (no end
offsets, a clock at 0) unless a test brings one, and settings a pass can run with."""

from __future__ import annotations

from typing import Any

from derived_views.adapters.kafka.offsets import EndOffsetsCache, Fetched
from derived_views.core.settings import CheckpointSettings, Settings, SparkSettings
from derived_views.reconcile.deps import Deps
from derived_views.reconcile.ports import KubePort
from support.stand_ins.kube import FakeKube

SETTINGS = Settings(spark=SparkSettings(template="", image="i"),
                    checkpoints=CheckpointSettings(base="/c"))
"""Settings with no SparkApplication template: enough for any pass that starts no job."""


def silent_offsets() -> EndOffsetsCache:
    """An end-offsets cache that reads nothing: every view's end offsets are unknown."""
    return EndOffsetsCache(interval=5, fetch=lambda cluster, topics: Fetched({}),
                           clock=lambda: 0.0)


def pass_deps(kube: KubePort | None = None, *, settings: Settings = SETTINGS,
              offsets: EndOffsetsCache | None = None, **fields: Any) -> Deps:
    """Deps for a pass in a test; any other field of Deps by name."""
    return Deps(kube=kube if kube is not None else FakeKube(), settings=settings,
                offsets=offsets if offsets is not None else silent_offsets(), **fields)
