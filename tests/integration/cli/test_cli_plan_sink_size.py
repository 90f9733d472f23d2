"""`dv plan`'s sink space against the real API server and PostgreSQL of the local stack: the
active index's size read through the view's sink Secret once the account may get it, and
said "not read", with why, while it may not."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from derived_views.api.spec import DerivedViewSpec
from derived_views.core.judges.tenancy import SECRET_LABEL
from derived_views.core.revision import revision_of
from support.cli_harness import CliEnv, G, V, spec_v1, spec_v2, wait_for
from support.pg_schemas import fresh_schema

pytestmark = pytest.mark.integration

ROWS = 1000
ROW_BYTES = 200
"""Random bytes per row (stored as hex): a bound below any size PostgreSQL can report."""


@pytest.fixture()
def pg_schema(stack: Any) -> Iterator[str]:
    with fresh_schema(stack.pg_dsn) as name:
        yield name


def in_schema(spec: dict[str, Any], schema: str) -> dict[str, Any]:
    spec["sink"]["postgres"]["schema"] = schema
    return spec


def may_get_secret(env: CliEnv) -> bool:
    try:
        client.CoreV1Api(env.as_account).read_namespaced_secret("views-db", env.namespace)
    except ApiException as exc:
        if exc.status == 403:
            return False
        raise
    return True


def plan_json(env: CliEnv, manifest: Path) -> dict[str, Any]:
    done = env.dv("plan", "-f", str(manifest), "-o", "json", "--no-server-dry-run")
    assert done.returncode == 2, (done.stdout, done.stderr)
    view: dict[str, Any] = json.loads(done.stdout)["views"][0]
    return view


def test_the_active_index_size_once_the_secret_may_be_read(
        cli_env: CliEnv, stack: Any, pg_schema: str, tmp_path: Path) -> None:
    active = revision_of(DerivedViewSpec.model_validate(in_schema(spec_v1(), pg_schema)))
    index = f"orders__{active}"
    with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE TABLE "{pg_schema}"."{index}" (order_id text PRIMARY KEY, '
                     "payload text)")
        with conn.cursor() as cur:
            cur.executemany(f'INSERT INTO "{pg_schema}"."{index}" VALUES (%s, %s)',
                            [(f"o-{i}", os.urandom(ROW_BYTES).hex()) for i in range(ROWS)])
    cli_env.create_view(in_schema(spec_v1(), pg_schema))
    since = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    cli_env.write_status({"revision": active, "phase": "Active",
                          "active": {"revision": active, "index": index, "since": since},
                          "revisions": [{"revision": active, "index": index, "phase": "Active",
                                         "since": since, "startedAt": since,
                                         "sparkApplication": f"orders-{active}",
                                         "checkpointLocation": f"s3a://dv/orders/{active}"}]})
    dsn = dict(item.split("=", 1) for item in stack.pg_dsn.split())
    core = client.CoreV1Api(cli_env.admin)
    core.create_namespaced_secret(cli_env.namespace, {
        "metadata": {"name": "views-db", "labels": {SECRET_LABEL: "true"}},
        "stringData": {"host": dsn["host"], "port": dsn["port"], "database": dsn["dbname"],
                       "user": dsn["user"], "password": dsn["password"]}})
    manifest = tmp_path / "views.yaml"
    manifest.write_text(json.dumps({
        "apiVersion": f"{G}/{V}", "kind": "DerivedView",
        "metadata": {"name": "orders", "namespace": cli_env.namespace},
        "spec": in_schema(spec_v2(), pg_schema)}))

    forbidden = plan_json(cli_env, manifest)["cost"]["sink"]
    assert (forbidden["activeIndex"], forbidden["activeBytes"]) == (index, None)
    assert "forbidden" in forbidden["notRead"], forbidden

    client.RbacAuthorizationV1Api(cli_env.admin).create_namespaced_role_binding(
        cli_env.namespace, {
            "metadata": {"name": "dv-cli-secrets"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": "dv-cli-secrets"},
            "subjects": [{"kind": "ServiceAccount", "name": "dv-cli",
                          "namespace": cli_env.namespace}]})
    client.RbacAuthorizationV1Api(cli_env.admin).create_namespaced_role(cli_env.namespace, {
        "metadata": {"name": "dv-cli-secrets"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]})
    wait_for(lambda: may_get_secret(cli_env), "the account's get on Secrets")
    read = plan_json(cli_env, manifest)["cost"]["sink"]
    assert read["notRead"] is None, read
    assert read["activeBytes"] > ROWS * ROW_BYTES
    assert read["peakBytes"] > 2 * ROWS * ROW_BYTES
