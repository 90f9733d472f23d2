"""The DerivedView spec, as pydantic models: the single source of the CRD schema.

Every field has a description so `kubectl explain dv.spec...` documents it;
cross-field rules that the API server can check are CEL rules
(`x-kubernetes-validations`) on the model, and are mirrored by pydantic
validators so the operator rejects the same input with the same words.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

GROUP = "derivedviews.io"
VERSION = "v1alpha1"
KIND = "DerivedView"
PLURAL = "derivedviews"

TOPIC_PATTERN = r"^[a-zA-Z0-9._-]{1,249}$"
IDENT_PATTERN = r"^[a-z_][a-z0-9_]{0,39}$"
COLUMN_PATTERN = r"^[a-zA-Z_][a-zA-Z0-9_]{0,62}$"


def _cel(*rules: tuple[str, str]) -> dict[str, Any]:
    return {"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]}


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class SecretRef(Model):
    name: Annotated[str, Field(min_length=1, max_length=253,
                               description="Name of a Secret in the view's namespace.")]


class KafkaConnection(Model):
    bootstrapServers: Annotated[str, Field(
        min_length=1, description="Comma-separated host:port list of the Kafka cluster.")]
    secretRef: Annotated[SecretRef | None, Field(
        description="Secret with SASL credentials (keys `username`, `password`); "
                    "omit for an unauthenticated cluster.")] = None


class Format(StrEnum):
    json = "json"
    debezium = "debezium"


class Source(Model):
    kafka: Annotated[KafkaConnection, Field(description="The Kafka cluster to read.")]
    topics: Annotated[list[Annotated[str, Field(pattern=TOPIC_PATTERN)]], Field(
        min_length=1, max_length=50,
        description="Topics replayed from offset 0 into every revision's index.")]
    format: Annotated[Format, Field(
        description="Encoding of the record values: `json` (one JSON object per value) or "
                    "`debezium` (a Debezium change envelope; op c/u/r upsert, d deletes).")] = Format.json
    schema_: Annotated[str, Field(
        alias="schema", min_length=1,
        description="Spark DDL of the event value, e.g. `order_id STRING, amount DOUBLE`.")]
    maxOffsetsPerTrigger: Annotated[int | None, Field(
        ge=1, description="Upper bound of records per micro-batch (bounds the driver's memory).")] = None


class PythonTransform(Model):
    function: Annotated[str, Field(
        pattern=r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$",
        description="`package.module:function` taking and returning a Spark DataFrame.")]
    pyFiles: Annotated[list[str], Field(
        description="Files or archives shipped with the job (spark-submit --py-files).")] = []


class Transform(Model):
    model_config = ConfigDict(
        extra="forbid", frozen=True,
        json_schema_extra=_cel(
            ("has(self.sql) != has(self.python)", "set exactly one of transform.sql or transform.python")),
    )
    sql: Annotated[str | None, Field(
        min_length=1, description="Spark SQL over the parsed events, available as the view `events`.")] = None
    python: Annotated[PythonTransform | None, Field(
        description="A registered Python function instead of SQL.")] = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Transform:
        if (self.sql is None) == (self.python is None):
            raise ValueError("set exactly one of transform.sql or transform.python")
        return self


class PostgresSink(Model):
    secretRef: Annotated[SecretRef, Field(
        description="Secret with keys host, port, database, user, password.")]
    table: Annotated[str, Field(
        pattern=IDENT_PATTERN,
        description="Base name: the alias view readers query; each revision's index is "
                    "`<table>__<revision>`.")]
    schema_: Annotated[str, Field(alias="schema", pattern=IDENT_PATTERN,
                                  description="PostgreSQL schema of the alias and indexes.")] = "public"


class Sink(Model):
    postgres: Annotated[PostgresSink, Field(description="The PostgreSQL sink.")]
    primaryKey: Annotated[list[Annotated[str, Field(pattern=COLUMN_PATTERN)]], Field(
        min_length=1, max_length=16,
        description="Output columns that identify a row; upserts and deletes go by them.")]


class CutoverMode(StrEnum):
    auto = "auto"
    manual = "manual"


class Cutover(Model):
    model_config = ConfigDict(
        extra="forbid", frozen=True,
        json_schema_extra=_cel(
            ("self.stableForSeconds < self.deadlineSeconds",
             "cutover.stableForSeconds must be less than cutover.deadlineSeconds")),
    )
    maxLagMessages: Annotated[int, Field(
        ge=0, description="Gate: the candidate's total lag must be at or under this many messages.")] = 0
    stableForSeconds: Annotated[int, Field(
        ge=0, le=86400, description="... continuously for this many seconds before cutover.")] = 10
    mode: Annotated[CutoverMode, Field(
        description="`auto` switches as soon as the gate holds; `manual` waits for the "
                    "annotation derivedviews.io/promote=<revision>.")] = CutoverMode.auto
    deadlineSeconds: Annotated[int, Field(
        ge=1, description="Abort a candidate not promoted within this time; the active keeps serving.")] = 3600
    retainPreviousSeconds: Annotated[int, Field(
        ge=0, description="Keep the previous index this long after cutover, for rollback.")] = 600

    @model_validator(mode="after")
    def _stable_before_deadline(self) -> Cutover:
        if self.stableForSeconds >= self.deadlineSeconds:
            raise ValueError("cutover.stableForSeconds must be less than cutover.deadlineSeconds")
        return self


class Resources(Model):
    cores: Annotated[int, Field(ge=1, le=64, description="CPU cores.")] = 1
    memory: Annotated[str, Field(pattern=r"^[0-9]+([kmgtKMGT]i?)?$",
                                 description="Memory, e.g. 1g or 2Gi.")] = "1g"


class Executors(Resources):
    instances: Annotated[int, Field(ge=1, le=1000, description="Number of executors.")] = 1


class RestartType(StrEnum):
    Never = "Never"
    OnFailure = "OnFailure"
    Always = "Always"


class RestartPolicy(Model):
    type: Annotated[RestartType, Field(description="The Spark Operator's restart policy.")] = RestartType.OnFailure
    onFailureRetries: Annotated[int, Field(ge=0, description="Retries before the job counts as failed.")] = 3
    onFailureRetryInterval: Annotated[int, Field(ge=1, description="Seconds between retries.")] = 10


class Spark(Model):
    image: Annotated[str | None, Field(description="Spark job image; defaults to the operator's setting.")] = None
    sparkVersion: Annotated[str, Field(description="Spark version of the image.")] = "4.0.0"
    driver: Annotated[Resources, Field(description="Driver resources.")] = Resources()
    executor: Annotated[Executors, Field(description="Executor resources.")] = Executors()
    sparkConf: Annotated[dict[str, str], Field(description="Extra Spark configuration.")] = {}
    restartPolicy: Annotated[RestartPolicy, Field(description="Retries of a failing job.")] = RestartPolicy()
    serviceAccount: Annotated[str | None, Field(description="Service account of the driver.")] = None


class DeletionPolicy(StrEnum):
    Retain = "Retain"
    Delete = "Delete"


class DerivedViewSpec(Model):
    source: Annotated[Source, Field(description="The Kafka topics the view is computed from.")]
    transform: Annotated[Transform, Field(description="How events become rows.")]
    sink: Annotated[Sink, Field(description="Where the index and its alias live.")]
    cutover: Annotated[Cutover, Field(description="When and how readers switch to a new revision.")] = Cutover()
    spark: Annotated[Spark, Field(description="Spark resources; changing them never replays.")] = Spark()
    deletionPolicy: Annotated[DeletionPolicy, Field(
        description="On view deletion: Retain keeps the alias and indexes, Delete drops them.")] = DeletionPolicy.Retain
