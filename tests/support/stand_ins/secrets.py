"""The Kubernetes side of the shell's unit tests: Secrets held in memory, each labelled for
views, answering as `adapters.kube.client.Kube.secret` does."""

from __future__ import annotations

from derived_views.adapters.kube.client import SecretMissing
from derived_views.core.judges.tenancy import SECRET_LABEL


class Secrets:
    def __init__(self, secrets: dict[str, dict[str, str]]) -> None:
        self.secrets = secrets

    def secret(self, namespace: str, name: str) -> tuple[dict[str, str], dict[str, str]]:
        if name not in self.secrets:
            raise SecretMissing(f"secret {namespace}/{name} not found")
        return self.secrets[name], {SECRET_LABEL: "true"}
