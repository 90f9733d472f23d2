"""`dv plan`'s reads of a view's sources, read-only, as the operator's pass reads them before a
job: its Secrets (reconcile.secrets), its schema registry (reconcile.registry_reading: never
asked when the tenancy policy does not list it) and, for a replay, its topics' log starts and
end offsets (reconcile.observe.topic_offsets: never from a cluster the policy does not list).

What cannot be read is said, never raised: the credentials may not read Secrets (a sentence
naming the permission to grant), a registry or a Kafka cluster that does not answer (the
pass's own reason and message, judged in core.preview).
"""

from __future__ import annotations

import logging
from typing import Any

from derived_views.adapters.kafka.offsets import EndOffsetsCache, Fetched, read_end_offsets
from derived_views.adapters.kube.client import Kube, SecretForbidden
from derived_views.adapters.schema_registry_cache import RegistryCache
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus
from derived_views.core.judges.tenancy import TenancyPolicy, secrets_of
from derived_views.core.log.kafka_connection import KafkaCluster, SourceOffsets
from derived_views.core.preview.reads import SourceReads
from derived_views.reconcile.observe import topic_offsets
from derived_views.reconcile.registry_reading import registry_reading
from derived_views.reconcile.secrets import PassSecrets

KAFKA_SECONDS = 3.0
"""How long a plan waits for a Kafka cluster: a CI job without a route to it should not hang."""
PLAN_READING_SECONDS = 3600.0
"""One reading per cluster for the whole plan (views of a cluster share it)."""


def _read_briefly(cluster: KafkaCluster, topics: frozenset[str]) -> Fetched:
    return read_end_offsets(cluster, topics, timeout=KAFKA_SECONDS)


class SourceReader:
    """Reads each view's sources with the CLI's credentials; the caches are shared by the
    views of one plan."""

    def __init__(self, api_client: Any, policy: TenancyPolicy) -> None:
        self.kube, self.policy = Kube(api_client), policy
        self.registries = RegistryCache()
        self.offsets = EndOffsetsCache(interval=PLAN_READING_SECONDS, fetch=_read_briefly)
        # the pass logs what it could not read; the plan says it in its report instead
        logging.getLogger("derived_views").addHandler(logging.NullHandler())

    def read(self, spec: DerivedViewSpec, namespace: str, name: str,
             status: DerivedViewStatus | None, *, replays: bool) -> SourceReads:
        """What the pass would read of `spec`'s sources (the log only when it `replays`)."""
        key = (namespace, name)
        secrets = PassSecrets(self.kube, namespace, self.policy)
        log_reads = replays
        try:
            labels = secrets.labels(secrets_of(spec))
        except SecretForbidden as exc:
            # without its Secret, no credentials to reach the registry or the cluster with
            log_reads = replays and spec.source.kafka.secret_ref is None
            said = ("its Secrets (present and labelled for views)"
                    + (", its schema registry" if spec.source.avro is not None else "")
                    + (" and its log" if replays and not log_reads else ""))
            return SourceReads(None, log=self._log(spec, key, secrets) if log_reads else None,
                               not_read=(f"{said}: not read: {exc}",))
        registry = registry_reading(spec, status or DerivedViewStatus(), key, self.registries,
                                    secrets)
        return SourceReads(labels, registry, self._log(spec, key, secrets) if log_reads else None)

    def _log(self, spec: DerivedViewSpec, key: tuple[str, str], secrets: PassSecrets
             ) -> SourceOffsets:
        return topic_offsets(spec, spec.source.topics, key, self.policy, self.offsets, secrets)
