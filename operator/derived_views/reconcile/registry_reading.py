"""What one pass reads of a view's schema registry (views that read Avro): whether it answers,
which of the topics' value subjects it holds, and the spec's pinned reader schema.

Never raises: every way the registry can fail becomes a (reason, message) on the
observation (core.observed.RegistryObserved), naming the registry by host and port and the
Secret by name, never a credential; the planner then starts no job (core.planner).
"""

from __future__ import annotations

import logging

from derived_views.adapters.kube.client import SecretMissing
from derived_views.adapters.schema_registry import (
    REGISTRY_SECRET_KEYS,
    Registry,
    RegistrySecretInvalid,
    RegistryUnavailable,
    SchemaNotFound,
)
from derived_views.adapters.schema_registry_cache import RegistryCache
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus
from derived_views.core import reasons
from derived_views.core.cadence import ViewKey
from derived_views.core.judges.source_schema import value_subjects
from derived_views.core.judges.tenancy import registry_refusal
from derived_views.core.observed import RegistryObserved, reader_to_fetch
from derived_views.reconcile.secrets import PassSecrets, SecretNotLabelled

log = logging.getLogger("derived_views")


def registry_reading(spec: DerivedViewSpec, status: DerivedViewStatus, key: ViewKey,
                     registries: RegistryCache, secrets: PassSecrets) -> RegistryObserved | None:
    """The registry's answers for the view; None for a view that reads no Avro. The pass and
    `dv plan` (which hands in its own cache) both ask it here."""
    avro = spec.source.avro
    if avro is None:
        return None
    ns = key[0]
    secret = f"secret {ns}/{avro.registry.secret_ref.name}"
    try:
        registry = Registry.from_secret_data(secrets.secret_data(ns, avro.registry.secret_ref
                                                                 .name))
    except SecretNotLabelled as exc:
        return RegistryObserved(where=secret, problem=(reasons.SECRET_NOT_LABELLED, str(exc)))
    except SecretMissing as exc:
        return RegistryObserved(where=secret, problem=(
            reasons.SECRET_MISSING, f"schema registry {exc}: create it (keys {REGISTRY_SECRET_KEYS}) or "
                                    "fix spec.source.avro.registry.secretRef"))
    except RegistrySecretInvalid as exc:
        return RegistryObserved(where=secret, problem=(
            reasons.SCHEMA_REGISTRY_SECRET_INVALID, f"schema registry {secret}: {exc}"))
    where = registry.describe()
    refused = registry_refusal(where, secrets.policy)
    if refused is not None:  # never asked: the operator's network is not the author's to probe
        return RegistryObserved(where=where, problem=(refused.reason, refused.message))
    try:
        held = registries.subjects(registry)
        unregistered = frozenset(value_subjects(spec.source)) - held
        pin = reader_to_fetch(spec, status)
        if pin is None:
            return RegistryObserved(where=where, unregistered=unregistered)
        try:
            text = registries.reader_schema(registry, pin)
        except SchemaNotFound as exc:
            return RegistryObserved(where=where, unregistered=unregistered, reader_problem=(
                reasons.READER_SCHEMA_NOT_FOUND, f"source.avro.readerSchema: {exc}"))
        return RegistryObserved(where=where, reader_schemas={pin: text},
                                unregistered=unregistered)
    except RegistryUnavailable as exc:
        log.warning("%s: schema registry unavailable: %s", "/".join(key), exc)
        return RegistryObserved(where=where, problem=(
            reasons.SCHEMA_REGISTRY_UNREACHABLE, f"{exc} ({secret})"))
