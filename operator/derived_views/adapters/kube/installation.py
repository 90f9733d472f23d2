"""The operator's installed settings, as the chart wrote them: its StatefulSet's environment.

`dv plan` judges a view by the tenancy policy and the job settings the installation has
(DV_TENANCY_POLICY, DV_SPARK_IMAGE, DV_TRIGGER_SECONDS, ...), not by the CLI's defaults; they
live in the operator container's `env`, where the chart's statefulset.yaml puts them. Only
plain values are read (`valueFrom` names a pod's field or a Secret, neither of them a setting
of the planner). Failures leave as ViewsError with a one-line message.
"""

from __future__ import annotations

from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from derived_views.adapters.kube.views import ViewsError

OPERATOR_NAMESPACE = "derived-views"
OPERATOR_NAME = "dv-derived-views"
"""The README's install: release `dv` of chart derived-views in namespace derived-views."""
CHART_SELECTOR = "app.kubernetes.io/name=derived-views"
"""The chart's selector label: finds a release installed under another name."""
CONTAINER = "operator"
_REQUEST_TIMEOUT_SECONDS = 10


def operator_env(api_client: Any, namespace: str, name: str) -> dict[str, str]:
    """The plain `env` values of the operator container of StatefulSet `namespace/name`; when
    there is no such StatefulSet, of the one release of the chart in `namespace`."""
    apps = client.AppsV1Api(api_client)
    try:
        try:
            found = apps.read_namespaced_stateful_set(
                name, namespace, _request_timeout=_REQUEST_TIMEOUT_SECONDS)
        except ApiException as exc:
            if exc.status != 404:
                raise
            listed = apps.list_namespaced_stateful_set(
                namespace, label_selector=CHART_SELECTOR,
                _request_timeout=_REQUEST_TIMEOUT_SECONDS).items
            if len(listed) != 1:
                raise ViewsError(
                    f"no operator StatefulSet {namespace}/{name}"
                    + (f" and {len(listed)} releases of the chart there" if listed else "")
                    + ": name it with --operator-namespace and --operator-name") from None
            found = listed[0]
    except ApiException as exc:
        raise ViewsError(f"cannot read the operator StatefulSet {namespace}/{name}: the API "
                         f"server answered {exc.status} {exc.reason}") from None
    except urllib3.exceptions.HTTPError as exc:
        raise ViewsError(f"API server unreachable: {' '.join(str(exc).split())}") from None
    containers = found.spec.template.spec.containers or []
    chosen = next((c for c in containers if c.name == CONTAINER),
                  containers[0] if containers else None)
    if chosen is None:
        raise ViewsError(f"the operator StatefulSet {namespace}/{name} has no container")
    return {e.name: e.value for e in chosen.env or [] if e.value is not None}
