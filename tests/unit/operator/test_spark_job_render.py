"""The SparkApplication rendered for a revision: snapshot, and no secret value anywhere."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml
from tests_support_spec import BASE  # type: ignore[import-not-found]

from derived_views import spark_job
from derived_views.resource.spec import DerivedViewSpec
from derived_views.settings import from_env

SNAPSHOT = Path(__file__).parent / "snapshots" / "sparkapplication.yaml"
VIEW = spark_job.ViewRef(namespace="shop", name="orders", uid="11111111-2222-3333-4444-555555555555")
SETTINGS = from_env({"DV_SPARK_IMAGE": "example/spark-job:1", "DV_CHECKPOINT_BASE": "s3a://ckpt/dv",
                     "DV_SPARK_JARS": "local:///opt/jars/a.jar"})


def _render() -> dict[str, object]:
    spec = DerivedViewSpec.model_validate({**BASE, "source": {
        **BASE["source"], "kafka": {"bootstrapServers": "kafka:9092", "secretRef": {"name": "kafka-creds"}}}})
    return spark_job.render(spark_job.load_template(), VIEW, spec, "0123456789", SETTINGS)


def test_matches_snapshot() -> None:
    rendered = yaml.safe_dump(_render(), sort_keys=True)
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(rendered)
    assert rendered == SNAPSHOT.read_text(), "rendering changed: review, then UPDATE_SNAPSHOTS=1"


def test_job_config_and_credentials_by_reference_only() -> None:
    manifest = _render()
    spec = manifest["spec"]
    assert isinstance(spec, dict)
    config = json.loads(spec["arguments"][1])
    assert config["sink"]["table"] == "orders__0123456789"
    assert config["checkpointLocation"] == "s3a://ckpt/dv/shop/orders/0123456789"
    assert config["transform"] == {"sql": "SELECT * FROM events"}
    env = {e["name"]: e for e in spec["driver"]["env"]}
    assert set(env) == {"PGHOST", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD",
                        "DV_KAFKA_SASL_USERNAME", "DV_KAFKA_SASL_PASSWORD"}
    assert all("value" not in e for e in env.values())
    assert env["PGPASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "db", "key": "password"}
    assert env["DV_KAFKA_SASL_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "kafka-creds"
    owner = manifest["metadata"]["ownerReferences"][0]  # type: ignore[index]
    assert owner["uid"] == VIEW.uid and owner["controller"] is True
