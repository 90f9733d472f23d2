"""The view's Secrets as one pass reads them: each read once, and one the tenancy policy does
not let views use never handed out (the operator does not connect with it either)."""

from __future__ import annotations

from derived_views.adapters.kube.client import SecretMissing
from derived_views.core.judges.tenancy import TenancyPolicy, secret_refusal
from derived_views.reconcile.ports import KubePort


class SecretNotLabelled(SecretMissing):
    """A Secret the tenancy policy keeps views from using; the message says how to allow it."""


class PassSecrets:
    """The view's Secrets, each read once per pass; one the policy does not let views use is
    never handed out (the operator does not connect with it either)."""

    def __init__(self, kube: KubePort, namespace: str, policy: TenancyPolicy) -> None:
        self.kube, self.namespace, self.policy = kube, namespace, policy
        self.read: dict[str, tuple[dict[str, str], dict[str, str]] | SecretMissing] = {}

    def _get(self, name: str) -> tuple[dict[str, str], dict[str, str]]:
        if name not in self.read:
            try:
                self.read[name] = self.kube.secret(self.namespace, name)
            except SecretMissing as exc:
                self.read[name] = exc
        got = self.read[name]
        if isinstance(got, SecretMissing):
            raise got
        return got

    def secret_data(self, namespace: str, name: str) -> dict[str, str]:
        data, labels = self._get(name)
        refusal = secret_refusal(namespace, name, labels, self.policy)
        if refusal is not None:
            raise SecretNotLabelled(refusal.message)
        return data

    def labels(self, names: tuple[str, ...]) -> dict[str, dict[str, str] | None]:
        """Labels of each Secret (None: missing), reading those not read yet."""
        found: dict[str, dict[str, str] | None] = {}
        for name in names:
            try:
                found[name] = self._get(name)[1]
            except SecretMissing:
                found[name] = None
        return found
