"""What a pass is handed (Deps: the adapters, the settings, the metrics, the check runner,
the failpoints) and what it notes as it goes (PassRecord, for metrics)."""

from __future__ import annotations

from dataclasses import dataclass, field

from derived_views.adapters.kafka.offsets import EndOffsetsCache
from derived_views.adapters.kafka.record_times import RecordTimesReader
from derived_views.adapters.kafka.topic_configs import TopicConfigsCache
from derived_views.adapters.schema_registry_cache import RegistryCache
from derived_views.adapters.sink_contract import SinkPools
from derived_views.api.status import DerivedViewStatus
from derived_views.core.log.kafka_connection import SourceOffsets
from derived_views.core.settings import Settings
from derived_views.process.failpoints import Failpoints
from derived_views.process.metrics import Metrics
from derived_views.reconcile.check_runner import CheckRunner
from derived_views.reconcile.job_namespaces import JobNamespaces
from derived_views.reconcile.ports import KubePort
from derived_views.reconcile.switch_deferrals import SwitchDeferrals


@dataclass
class Deps:
    kube: KubePort
    offsets: EndOffsetsCache
    settings: Settings
    metrics: Metrics = field(default_factory=Metrics)
    sink_pools: SinkPools = field(default_factory=SinkPools)
    check_runner: CheckRunner = field(default_factory=CheckRunner)
    """Runs cutover checks off the pass threads (check_runner)."""
    failpoints: Failpoints = field(default_factory=Failpoints)
    """Where a fault test may hold the pass (all off unless the environment armed them)."""
    deferrals: SwitchDeferrals = field(default_factory=SwitchDeferrals)
    """Switches the sink deferred, for the view's next observation (switch_deferrals)."""
    record_times: RecordTimesReader = field(default_factory=RecordTimesReader)
    """Kafka timestamps at the indexes' committed offsets, for staleness (cached)."""
    job_namespaces: JobNamespaces = field(default_factory=JobNamespaces)
    """The labels of job namespaces (reconcile.job_namespaces), cached."""
    registries: RegistryCache = field(default_factory=RegistryCache)
    """Schema registries' subjects and pinned reader schemas, for views that read Avro."""
    topic_configs: TopicConfigsCache = field(default_factory=TopicConfigsCache)
    """Topics' retention settings, read every few minutes per cluster (kafka_topic_configs)."""


@dataclass
class PassRecord:
    """What one pass did that metrics care about; filled in as it goes."""

    stage: str = "observe"
    index_rows: dict[str, int] = field(default_factory=dict)
    status: DerivedViewStatus | None = None
    switched: bool = False
    source: SourceOffsets | None = None
