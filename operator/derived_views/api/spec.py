"""The DerivedView spec as pydantic models: the one source of the CRD schema.

Every field carries a description so `kubectl explain dv.spec...` documents
it. Cross-field rules are CEL rules (`x-kubernetes-validations`) that the API
server enforces, mirrored by pydantic validators with the same message so a
spec the planner sees has passed the same checks.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

TOPIC_PATTERN = r"^[a-zA-Z0-9._-]{1,249}$"
TABLE_PATTERN = r"^[a-z_][a-z0-9_]{0,39}$"
PG_SCHEMA_PATTERN = r"^[a-z_][a-z0-9_]{0,62}$"
COLUMN_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"
BOOTSTRAP_PATTERN = r"^ *[^, ]+:[0-9]{1,5} *(, *[^, ]+:[0-9]{1,5} *)*$"
"""host:port[,host:port...]: the job's Java Kafka client refuses an address without a port."""
SECRET_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
PYTHON_FUNCTION_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
SPARK_MEMORY_PATTERN = r"^[0-9]+([kmgtpKMGTP][bB]?)?$"

TRANSFORM_RULE = "has(self.sql) != has(self.python)"
TRANSFORM_MESSAGE = "set exactly one of transform.sql or transform.python"
PRIMARY_KEY_RULE = "size(self.primaryKey) > 0 && !self.primaryKey.exists(k, k.startsWith('_dv_'))"
PRIMARY_KEY_MESSAGE = "sink.primaryKey needs at least one column, none starting with _dv_ (reserved)"
CUTOVER_RULE = "!has(self.deadlineSeconds) || self.stableForSeconds < self.deadlineSeconds"
CUTOVER_MESSAGE = "cutover.stableForSeconds must be less than cutover.deadlineSeconds"
PROGRESS_RULE = "self.stableForSeconds < self.progressDeadlineSeconds"
PROGRESS_MESSAGE = "cutover.stableForSeconds must be less than cutover.progressDeadlineSeconds"
DEFAULT_MAX_OFFSETS_PER_TRIGGER = 1_000_000
IMMUTABLE_RULE = "self == oldSelf"
DEAD_LETTER_RULE = "(self.policy == 'deadLetter') == has(self.deadLetterTopic)"
DEAD_LETTER_MESSAGE = ("source.badRecords.deadLetterTopic is required with policy deadLetter, "
                       "and only then")

SPARK_CONF_DENIED: tuple[tuple[tuple[str, ...], str], ...] = (
    (("spark.kubernetes.authenticate.driver.serviceAccountName",
      "spark.kubernetes.authenticate.executor.serviceAccountName"),
     "use spec.spark.serviceAccount"),
    (("spark.kubernetes.container.image", "spark.kubernetes.driver.container.image",
      "spark.kubernetes.executor.container.image"),
     "use spec.spark.image"),
    (("spark.kubernetes.authenticate.oauthToken", "spark.kubernetes.authenticate.oauthTokenFile",
      "spark.kubernetes.authenticate.driver.oauthToken",
      "spark.kubernetes.authenticate.driver.oauthTokenFile",
      "spark.kubernetes.authenticate.executor.oauthToken",
      "spark.kubernetes.authenticate.executor.oauthTokenFile"),
     "jobs authenticate as their ServiceAccount: grant spec.spark.serviceAccount what the job "
     "needs"),
    (("spark.master", "spark.kubernetes.driver.master", "spark.submit.deployMode",
      "spark.kubernetes.submission.waitAppCompletion"),
     "the Spark Operator submits every job to its own cluster in cluster mode; remove them"),
    (("spark.kubernetes.namespace",),
     "a view's jobs run in the view's namespace; create the view where they should run"),
    (("spark.app.name", "spark.kubernetes.driver.pod.name"),
     "the operator names each job after metadata.name and the revision, and reads causes from "
     "its driver pod <job>-driver; remove them"),
    (("spark.driver.cores", "spark.driver.memory"), "use spec.spark.driver"),
    (("spark.executor.instances", "spark.executor.cores", "spark.executor.memory"),
     "use spec.spark.executor"),
)
"""sparkConf keys the Kubeflow Spark Operator denies (its webhook's deniedSparkConfKeys and
spark.kubernetes.namespace) or sets itself from the SparkApplication's fields, so a value
here would be refused or silently ignored; each group with where to say it instead."""
SPARK_CONF_MAX_KEYS = 256
SPARK_CONF_MAX_KEY = 256
SPARK_CONF_MAX_VALUE = 4096
SPARK_CONF_KEYS_RULE = f"self.all(k, k.size() <= {SPARK_CONF_MAX_KEY})"
SPARK_CONF_KEYS_MESSAGE = (f"spec.spark.sparkConf: keys must be at most {SPARK_CONF_MAX_KEY} "
                           "characters (Spark's own keys are under 100)")
MAX_SQL = 65536
"""transform.sql: 64 KiB holds a generated query of a thousand lines; every live revision's
status record keeps a copy, so the view must still fit the API server's 1.5 MiB object."""
MAX_SCHEMA = 32768
"""source.schema: 32 KiB holds about a thousand typed fields; copied into status like the SQL."""
MAX_SUBJECT = 512
"""A registry subject's name: `<topic>-value` is at most 255; record-name strategies add a
record's full name."""
SUBJECT_PATTERN = r"^\S+$"
MAX_SUBJECT_VERSION = 2**31 - 1
"""Confluent's version numbers are Java ints."""
READER_SCHEMA_RULE = "has(self.schema) != has(self.subject) && has(self.subject) == has(self.version)"
READER_SCHEMA_MESSAGE = ("source.avro.readerSchema takes exactly one of schema (the reader "
                         "schema inline) or subject with version (a version registered in the "
                         "schema registry, e.g. subject: orders-value, version: 3)")
MAX_CHECK_SQL = 16384
"""An assertion's sql: one SELECT; 32 of them at 16 KiB keep the spec well under 1.5 MiB."""
MAX_COUNT = 1_000_000_000_000
"""Counts of messages or rows: above what any topic holds, below 2^53 so every JSON reader
reads them exactly."""
WEEK_SECONDS = 7 * 86400
MAX_RETAIN_SECONDS = 30 * 86400


def spark_conf_message(keys: tuple[str, ...], instead: str) -> str:
    return (f"spec.spark.sparkConf must not set {', '.join(keys)} (the Spark Operator sets or "
            f"denies them): {instead}")


def spark_conf_rule(keys: tuple[str, ...]) -> str:
    listed = ", ".join(f"'{k}'" for k in keys)
    return f"!self.exists(k, k in [{listed}])"


def cel(*rules: tuple[str, str]) -> dict[str, Any]:
    """`x-kubernetes-validations` for a model's or field's JSON schema."""
    return {"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]}


def object_default() -> dict[str, Any]:
    """`default: {}` on an object field, so the API server fills its nested defaults."""
    return {"default": {}}


class ApiModel(BaseModel):
    """camelCase on the wire, snake_case in Python; frozen so a plan cannot alter its input."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True,
                              validate_by_alias=True, serialize_by_alias=True,
                              frozen=True, extra="forbid")


class SecretRef(ApiModel):
    """A Secret in the view's namespace."""

    name: Annotated[str, Field(min_length=1, max_length=253, pattern=SECRET_NAME_PATTERN,
                               description="Name of a Secret in the view's namespace.")]


class KafkaConnection(ApiModel):
    """How to reach the Kafka cluster (connection details: not part of the revision)."""

    bootstrap_servers: Annotated[str, Field(
        min_length=1, max_length=4096, pattern=BOOTSTRAP_PATTERN,
        description="Comma-separated host:port list of the Kafka brokers. A connection detail: "
                    "changing it does not start a replay.")]
    secret_ref: Annotated[SecretRef | None, Field(
        description="Secret the job and the operator connect with: `username`, `password` "
                    "(SASL credentials), optional `mechanism` (PLAIN (default), SCRAM-SHA-256, "
                    "SCRAM-SHA-512), optional `securityProtocol` (SASL_SSL (default), "
                    "SASL_PLAINTEXT, SSL: no credentials needed), optional `ca.crt` (PEM "
                    "certificates to trust for TLS). Omit for a plaintext cluster without "
                    "authentication. A connection detail: changing it does not start a replay.")] = None


class BadRecords(ApiModel):
    """What the job does with a record it cannot turn into index rows.

    Bad: a value that is not a JSON object, a field whose type does not match
    `schema`, text holding a NUL character (PostgreSQL cannot store it), a
    Debezium op that cannot be mapped, and an output row with a NULL primary
    key. Each is caught before the transform sees it (the NULL key: after it),
    so it is never summed or counted as nulls.

    Not part of the revision: the policy decides whether the job stops at a bad
    record, not what a good record contributes. Changing it restarts the running
    jobs from their checkpoints (the way past a record that stopped a job under
    `fail` is to set `skip` or `deadLetter`, without a replay); the records a
    revision left out are counted in its status, so a revision that skipped
    records never looks like one that did not.
    """

    model_config = ConfigDict(json_schema_extra=cel((DEAD_LETTER_RULE, DEAD_LETTER_MESSAGE)))

    policy: Annotated[Literal["fail", "skip", "deadLetter"], Field(
        description="`fail` (default): the job stops; the view is Degraded with the record's "
                    "topic/partition@offset and the cause. `skip`: the record is left out and "
                    "counted. `deadLetter`: left out, counted, and sent to deadLetterTopic with "
                    "its original key, value and headers plus dv.* headers naming the cause, "
                    "source topic, partition, offset and revision (at-least-once).")] = "fail"
    dead_letter_topic: Annotated[str | None, Field(
        max_length=249, pattern=TOPIC_PATTERN,
        description="Topic receiving bad records under `deadLetter`, on the source's Kafka "
                    "cluster with its credentials; it must exist (or the broker must create "
                    "topics on first write).")] = None

    @model_validator(mode="after")
    def _topic_with_dead_letters(self) -> BadRecords:
        if (self.policy == "deadLetter") != (self.dead_letter_topic is not None):
            raise ValueError(DEAD_LETTER_MESSAGE)
        return self


class SchemaRegistry(ApiModel):
    """A registry speaking the Confluent Schema Registry API (a connection detail)."""

    secret_ref: Annotated[SecretRef, Field(
        description="Secret with `url` (the Confluent-compatible API, e.g. "
                    "`http://registry:8080/apis/ccompat/v7`), optional `username` and "
                    "`password` (HTTP basic authentication), optional `ca.crt` (PEM "
                    "certificates to trust for TLS). Mounted into the job's driver only. A "
                    "connection detail: changing it does not start a replay.")]


class ReaderSchema(ApiModel):
    """The shape every record is resolved to, whichever writer's schema it was written with:
    inline, or a version of a registry subject (pinned: a later version never changes the
    view under its readers; naming another version is a new revision)."""

    model_config = ConfigDict(json_schema_extra=cel((READER_SCHEMA_RULE, READER_SCHEMA_MESSAGE)))

    text: Annotated[str | None, Field(
        alias="schema", min_length=2, max_length=MAX_SCHEMA,
        description="The Avro reader schema (JSON), a record: its fields become the events' "
                    "columns (for debezium: the table row's, read from `before`/`after` and, "
                    "for a tombstone, from the record key), typed as Spark's Avro reader "
                    "types them. Records written with any writer's schema Avro can resolve "
                    "to it (fields added with defaults, fields removed, types promoted) read "
                    "as this shape. Part of the revision. Instead of it, `subject` and "
                    "`version` name one registered in the schema registry.")
                    ] = None
    subject: Annotated[str | None, Field(
        min_length=1, max_length=MAX_SUBJECT, pattern=SUBJECT_PATTERN,
        description="The registry subject whose `version` is the reader schema, e.g. "
                    "`orders-value`; the operator fetches it before any job starts and keeps "
                    "its text in the revision's status. Part of the revision.")] = None
    version: Annotated[int | None, Field(
        ge=1, le=MAX_SUBJECT_VERSION,
        description="The subject's version number (1, 2, ...). Not `latest`: a version "
                    "registered later must not change the view's rows without a new "
                    "revision. Part of the revision.")] = None

    @model_validator(mode="after")
    def _inline_or_pinned(self) -> ReaderSchema:
        pinned = self.subject is not None
        if (self.text is not None) == pinned or pinned != (self.version is not None):
            raise ValueError(READER_SCHEMA_MESSAGE)
        return self


class AvroSource(ApiModel):
    """How `avro` values are read: the Confluent wire format (a magic byte 0, the writer's
    schema id, the Avro binary), each writer's schema fetched from the registry by its id."""

    registry: Annotated[SchemaRegistry, Field(description="Where writers' schemas are.")]
    reader_schema: Annotated[ReaderSchema, Field(description="The reader schema.")]


AVRO_RULE = ("self.format == 'avro' ? (has(self.avro) && !has(self.schema)) : "
             "self.format == 'debezium' ? (has(self.avro) != has(self.schema)) : "
             "(has(self.schema) && !has(self.avro))")
AVRO_MESSAGE = ("source: format avro takes avro (the registry and the reader schema) and no "
                "schema (the events' types come from the reader schema); debezium takes "
                "either schema (JSON change events) or avro (Avro change events); json takes "
                "schema and no avro")


class Source(ApiModel):
    """The Kafka topics the view is computed from, and how to read their values."""

    model_config = ConfigDict(json_schema_extra=cel((AVRO_RULE, AVRO_MESSAGE)))

    kafka: Annotated[KafkaConnection, Field(description="The Kafka cluster to read from.")]
    topics: Annotated[list[Annotated[str, Field(max_length=249, pattern=TOPIC_PATTERN)]], Field(
        min_length=1, max_length=100, json_schema_extra={"x-kubernetes-list-type": "set"},
        description="Topics replayed from offset 0 into every revision's index (at most 100, "
                    "Kafka names of at most 249 characters). Part of the revision.")]
    format: Annotated[Literal["json", "debezium", "avro"], Field(
        description="Encoding of record values: `json` (one JSON object per value), "
                    "`debezium` (Debezium change events: JSON with `schema`, or Avro with "
                    "`avro`, as Debezium's JSON or Avro converter writes them) or `avro` (Avro "
                    "in the Confluent wire format, see `avro`). Part of the revision.")] = "json"
    value_schema: Annotated[str | None, Field(
        alias="schema", min_length=1, max_length=MAX_SCHEMA,
        description="Spark DDL of the event value, e.g. `order_id STRING, amount DOUBLE`, "
                    "for json and JSON debezium (with `avro`: from `avro.readerSchema`). At "
                    "most 32768 characters (about a thousand fields; each live revision's status keeps a "
                    "copy). Part of the revision.")] = None
    avro: Annotated[AvroSource | None, Field(
        description="With format avro, or debezium through Debezium's Avro converter: the "
                    "schema registry and the reader schema (for debezium, of the table's "
                    "row).")] = None
    max_offsets_per_trigger: Annotated[int, Field(
        ge=1, le=100_000_000,
        description="Upper bound on records per micro-batch across all partitions while "
                    "replaying (caught up, a batch holds what arrived since the last one); "
                    "bounds each sink transaction and, for a sink written from the driver "
                    "(OpenSearch), the driver's memory. Larger batches replay faster. Changing "
                    "it restarts the running jobs from their checkpoints. Not part of the "
                    "revision.")] = DEFAULT_MAX_OFFSETS_PER_TRIGGER
    bad_records: Annotated[BadRecords, Field(
        # The full default, not {}: the API server checks a default against the CEL rule
        # without filling the nested defaults first.
        json_schema_extra={"default": {"policy": "fail"}},
        description="What to do with records that cannot become index rows: fail (default), "
                    "skip or deadLetter. Changing it restarts the running jobs from their "
                    "checkpoints. Not part of the revision.")] = BadRecords()
    history: Annotated[Literal["complete", "fromLogStart"], Field(
        description="What history an index must hold before readers see it. `complete` "
                    "(default): only an index built from offset 0 of every partition (or from "
                    "where the serving index's history starts, if the view accepted less "
                    "before); a revision whose replay starts later, because retention or "
                    "delete-records removed the log's first records, is built but not "
                    "promoted (HistoryIncomplete, naming the partitions and how many records "
                    "are gone). `fromLogStart`: the replay reads what the log holds and may "
                    "serve with less history; the status says from which offset each "
                    "partition's history starts. Not part of the revision: changing it never "
                    "replays, it only changes what may serve (docs/history.md).")] = "complete"

    @model_validator(mode="after")
    def _avro_or_schema(self) -> Source:
        avro, schema = self.avro is not None, self.value_schema is not None
        allowed = {"avro": avro and not schema, "debezium": avro != schema}
        if not allowed.get(self.format, schema and not avro):
            raise ValueError(AVRO_MESSAGE)
        return self


class PythonTransform(ApiModel):
    """A Python function from DataFrame to DataFrame, shipped with the job."""

    function: Annotated[str, Field(
        pattern=PYTHON_FUNCTION_PATTERN, max_length=512,
        description="`package.module:function`, called once with the events DataFrame; it "
                    "returns the view's DataFrame.")]
    py_files: Annotated[list[Annotated[str, Field(min_length=1, max_length=4096)]], Field(
        max_length=64,
        description="Files or archives shipped with the job (spark-submit --py-files; at most "
                    "64 URIs of at most 4096 characters). Part of the revision.")] = []


class Transform(ApiModel):
    """How events become rows: Spark SQL or a Python function (exactly one)."""

    model_config = ConfigDict(json_schema_extra=cel((TRANSFORM_RULE, TRANSFORM_MESSAGE)))

    sql: Annotated[str | None, Field(
        min_length=1, max_length=MAX_SQL,
        description="Spark SQL over the parsed events, available as the view `events`. At "
                    "most 65536 characters (a generated query of a thousand lines; each live "
                    "revision's status keeps a copy, and the view must fit the API server's "
                    "1.5 MiB object limit).")] = None
    python: Annotated[PythonTransform | None, Field(
        description="A Python function instead of SQL.")] = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Transform:
        if (self.sql is None) == (self.python is None):
            raise ValueError(TRANSFORM_MESSAGE)
        return self


class PostgresSink(ApiModel):
    """The PostgreSQL database holding the indexes and the alias readers query."""

    secret_ref: Annotated[SecretRef, Field(
        description="Secret with the keys host, port, database, user and password (optional "
                    "sslmode). A connection detail: not part of the revision.")]
    table: Annotated[str, Field(
        max_length=40, pattern=TABLE_PATTERN,
        json_schema_extra=cel((IMMUTABLE_RULE, "sink.postgres.table is immutable: readers query "
                               "it by this name; create a new view instead")),
        description="Base name: readers query the alias, a view of this name; each revision's "
                    "index is the table `<table>__<revision>`. Immutable.")]
    db_schema: Annotated[str, Field(
        alias="schema", max_length=63, pattern=PG_SCHEMA_PATTERN,
        json_schema_extra=cel((IMMUTABLE_RULE, "sink.postgres.schema is immutable: readers query "
                               "the alias in it; create a new view instead")),
        description="PostgreSQL schema of the alias and the indexes. Immutable.")] = "public"


OPENSEARCH_INDEX_PATTERN = r"^[a-z][a-z0-9_-]{0,39}$"
"""OpenSearch index and alias names are lowercase and cannot start with `_`, `-` or `+`."""
ONE_SINK_RULE = "has(self.postgres) != has(self.opensearch)"
ONE_SINK_MESSAGE = "spec.sink: set exactly one of postgres and opensearch"
SINK_KIND_RULE = "has(self.postgres) == has(oldSelf.postgres)"
SINK_KIND_MESSAGE = ("spec.sink: the sink's kind is immutable (readers query its alias there); "
                     "create a new view for another sink")


class OpenSearchSink(ApiModel):
    """The OpenSearch cluster holding the indexes and the alias readers search."""

    secret_ref: Annotated[SecretRef, Field(
        description="Secret with the key url (e.g. https://search.example:9200) and optionally "
                    "username and password. A connection detail: not part of the revision.")]
    index: Annotated[str, Field(
        max_length=40, pattern=OPENSEARCH_INDEX_PATTERN,
        json_schema_extra=cel((IMMUTABLE_RULE, "sink.opensearch.index is immutable: readers "
                               "search it by this name; create a new view instead")),
        description="Base name: readers search the alias of this name; each revision's index "
                    "is `<index>__<revision>`. Immutable.")]


class Sink(ApiModel):
    """Where the rows go, and what identifies a row."""

    model_config = ConfigDict(json_schema_extra=cel(
        (PRIMARY_KEY_RULE, PRIMARY_KEY_MESSAGE), (ONE_SINK_RULE, ONE_SINK_MESSAGE),
        (SINK_KIND_RULE, SINK_KIND_MESSAGE)))

    postgres: Annotated[PostgresSink | None, Field(
        description="The PostgreSQL sink (set exactly one of postgres and opensearch).")] = None
    opensearch: Annotated[OpenSearchSink | None, Field(
        description="The OpenSearch sink (set exactly one of postgres and opensearch).")] = None
    primary_key: Annotated[list[Annotated[str, Field(max_length=63, pattern=COLUMN_PATTERN)]],
                           Field(
        min_length=1, max_length=16, json_schema_extra={"x-kubernetes-list-type": "set"},
        description="Output columns identifying a row; upserts and deletes go by them (in "
                    "OpenSearch: the document id). Part of the revision.")]

    # What the operator's core asks of any sink kind; only the sink adapter
    # (derived_views.adapters.sink) reads the kind's own settings.
    @property
    def kind(self) -> str:
        """Which sink module serves the view (`derived_views.adapters.sink.SINK_KINDS`)."""
        return "opensearch" if self.opensearch is not None else "postgres"

    @property
    def secret_ref(self) -> SecretRef:
        """The Secret with the sink's connection details."""
        if self.opensearch is not None:
            return self.opensearch.secret_ref
        assert self.postgres is not None  # _one_sink
        return self.postgres.secret_ref

    @property
    def alias(self) -> str:
        """The alias readers query; each revision's index is `<alias>__<revision>`."""
        if self.opensearch is not None:
            return self.opensearch.index
        assert self.postgres is not None
        return self.postgres.table

    @property
    def db_schema(self) -> str:
        """Where the alias and the indexes live within the sink (PostgreSQL: the schema;
        OpenSearch: empty, one namespace per cluster)."""
        if self.opensearch is not None:
            return ""
        assert self.postgres is not None
        return self.postgres.db_schema

    @property
    def qualified_alias(self) -> str:
        """The alias as a person finds it: `schema.table`, or the OpenSearch alias."""
        return f"{self.db_schema}.{self.alias}" if self.db_schema else self.alias

    @model_validator(mode="after")
    def _one_sink(self) -> Sink:
        if (self.postgres is None) == (self.opensearch is None):
            raise ValueError(ONE_SINK_MESSAGE)
        return self

    @model_validator(mode="after")
    def _key(self) -> Sink:
        if not self.primary_key or any(k.startswith("_dv_") for k in self.primary_key):
            raise ValueError(PRIMARY_KEY_MESSAGE)
        return self


CHECK_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
INDEX_PLACEHOLDER = "{index}"
ACTIVE_PLACEHOLDER = "{active}"
"""Placeholders of a check's SQL for the candidate's and the active's index table. Single
braces: Helm templates (`{{ }}`) and Flux substitutions (`${ }`) leave them alone."""
ASSERTION_INDEX_RULE = "self.sql.contains('{index}')"
ASSERTION_INDEX_MESSAGE = ("an assertion's sql must query the candidate's index as {index} (the "
                           "operator puts the candidate's table there; never name a revision's "
                           "table)")
ROW_COUNT_RULE = "has(self.maxDifference) || has(self.maxRelativeDifference)"
ROW_COUNT_MESSAGE = ("cutover.checks.rowCount needs maxDifference (rows) and/or "
                     "maxRelativeDifference (a fraction of the active's rows)")
ASSERTION_NAMES_MESSAGE = "cutover.checks.assertions: names must be unique"
RESERVED_CHECK_NAME = "diff"
"""The diff check's result carries this name: an assertion of that name would be read as it."""
ASSERTION_NAME_RULE = f"self.name != '{RESERVED_CHECK_NAME}'"
ASSERTION_NAME_MESSAGE = (f"cutover.checks.assertions: the name {RESERVED_CHECK_NAME} is the "
                          "diff check's (cutover.checks.diff); name the assertion otherwise")


class RowCountCheck(ApiModel):
    """Row-count parity: the candidate holds about as many rows as the active index."""

    model_config = ConfigDict(json_schema_extra=cel((ROW_COUNT_RULE, ROW_COUNT_MESSAGE)))

    max_difference: Annotated[int | None, Field(
        ge=0, le=MAX_COUNT, description="Rows the two counts may differ by.")] = None
    max_relative_difference: Annotated[float | None, Field(
        ge=0, le=1, description="Fraction of the active's rows the counts may differ by, e.g. "
                                "0.01. With both set, the larger allowance applies.")] = None

    @model_validator(mode="after")
    def _a_tolerance(self) -> RowCountCheck:
        if self.max_difference is None and self.max_relative_difference is None:
            raise ValueError(ROW_COUNT_MESSAGE)
        return self


class KeySampleCheck(ApiModel):
    """Key-set parity on a sample: keys present in one index and not in the other."""

    size: Annotated[int, Field(
        ge=1, le=100_000, description="Keys sampled from each index.")] = 1000
    max_missing: Annotated[int, Field(
        ge=0, le=200_000, description="Sampled keys (both directions together) that may be missing from "
                          "the other index, e.g. keys that arrived while the counts ran.")] = 0


class SqlAssertion(ApiModel):
    """A team's own query over the candidate's index that must hold before readers switch."""

    model_config = ConfigDict(json_schema_extra=cel((ASSERTION_INDEX_RULE,
                                                     ASSERTION_INDEX_MESSAGE),
                                                    (ASSERTION_NAME_RULE,
                                                     ASSERTION_NAME_MESSAGE)))

    name: Annotated[str, Field(
        max_length=63, pattern=CHECK_NAME_PATTERN,
        description="Name shown in the status, events and metrics, e.g. no-negative-balances.")]
    sql: Annotated[str, Field(
        min_length=1, max_length=MAX_CHECK_SQL,
        description="One PostgreSQL query reading `{index}` (the candidate's index table) and "
                    "optionally `{active}` (the active's), e.g. `SELECT customer_id, balance "
                    "FROM {index} WHERE balance < 0`. Runs in a read-only transaction under "
                    "the same tenancy policy as the transform. At most 16384 characters (32 "
                    "assertions must fit the API server's 1.5 MiB object limit).")]
    expect: Annotated[Literal["noRows", "true"], Field(
        description="`noRows` (default): the query returns no rows (each row it returns is a "
                    "violation); `true`: it returns one row whose first column is true.")
                      ] = "noRows"
    timeout_seconds: Annotated[int, Field(
        ge=1, le=3600, description="Statement timeout; a query that runs longer blocks the "
                                   "cutover as an error.")] = 30

    @model_validator(mode="after")
    def _reads_the_index(self) -> SqlAssertion:
        if INDEX_PLACEHOLDER not in self.sql:
            raise ValueError(ASSERTION_INDEX_MESSAGE)
        if self.name == RESERVED_CHECK_NAME:
            raise ValueError(ASSERTION_NAME_MESSAGE)
        return self


PERCENT_PATTERN = r"^(100(\.0+)?|[0-9]{1,2}(\.[0-9]+)?)%$"
"""A share of the active's rows, from 0% to 100%, e.g. 1% or 0.5%."""
MAX_DIFF_COLUMNS = 256
DIFF_COLUMNS_RULE = ("size(self.columns) == 0 || "
                     "self.maxChangedRowsByColumn.all(c, c in self.columns)")
DIFF_COLUMNS_MESSAGE = ("cutover.checks.diff.maxChangedRowsByColumn names a column missing from "
                        "cutover.checks.diff.columns: compare the column to judge it")
BY_COLUMN_RULE = "self.all(c, c.matches('^[A-Za-z_][A-Za-z0-9_]{0,62}$'))"
BY_COLUMN_MESSAGE = "cutover.checks.diff.maxChangedRowsByColumn: keys are column names"

ChangedRows = Annotated[
    StrictInt | StrictStr,
    # Value validations, not CEL: a rule over a string of unbounded length exceeds the API
    # server's cost budget. `pattern` applies to a string only, the bounds to a number only.
    WithJsonSchema({"x-kubernetes-int-or-string": True,
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                    "pattern": PERCENT_PATTERN, "minimum": 0, "maximum": MAX_COUNT}),
]
"""Rows that may differ: a count (100) or a percentage of the active's rows ("1%")."""


def changed_rows_problem(where: str, value: int | str) -> str | None:
    """Why `value` is not a row count or a percentage (None: it is one)."""
    if isinstance(value, int):
        if 0 <= value <= MAX_COUNT:
            return None
    elif re.fullmatch(PERCENT_PATTERN, value):
        return None
    return (f"{where} must be a row count (0 or more) or a percentage of the active's rows "
            f"from 0% to 100%, e.g. 100 or \"1%\"; got {value!r}")


class DiffCheck(ApiModel):
    """A value-level comparison of the candidate's index with the active's, row by row.

    Counts the rows only in the candidate, the rows only in the active and the rows whose
    values differ (per column), with a few example keys; blocks the cutover when more rows
    differ than allowed. A change a team means to make shows as rows that differ: allow
    for it, per column if need be."""

    model_config = ConfigDict(json_schema_extra=cel((DIFF_COLUMNS_RULE,
                                                     DIFF_COLUMNS_MESSAGE)))

    max_changed_rows: Annotated[ChangedRows, Field(
        description="Rows that may differ in all (only in the candidate, only in the active, "
                    "or with other values): a count, e.g. 100, or a percentage of the active's "
                    "rows, e.g. \"1%\".")]
    max_changed_rows_by_column: Annotated[dict[str, ChangedRows], Field(
        max_length=MAX_DIFF_COLUMNS, json_schema_extra=cel((BY_COLUMN_RULE, BY_COLUMN_MESSAGE)),
        description="Per column, rows (in both indexes) whose value of the column may "
                    "differ, as a count or a percentage, e.g. {balance: 0, note: \"5%\"}.")
                                          ] = {}
    columns: Annotated[list[Annotated[str, Field(pattern=COLUMN_PATTERN, max_length=63)]],
                       Field(max_length=MAX_DIFF_COLUMNS,
                             description="The columns to compare (default: every column both "
                                         "indexes have). A name either index lacks is an error "
                                         "of the check; the primary key is what rows are "
                                         "matched by, never compared.")] = []
    full_comparison_max_rows: Annotated[int, Field(
        ge=0, le=MAX_COUNT,
        description="Up to this many rows (the larger index), both indexes are compared row "
                    "by row; above it, by hashed key ranges first and row by row only inside "
                    "ranges that differ (PostgreSQL; OpenSearch always streams both indexes).")
                                        ] = 100_000

    @model_validator(mode="after")
    def _thresholds(self) -> DiffCheck:
        problem = changed_rows_problem("cutover.checks.diff.maxChangedRows",
                                       self.max_changed_rows)
        for column, value in self.max_changed_rows_by_column.items():
            problem = problem or changed_rows_problem(
                f"cutover.checks.diff.maxChangedRowsByColumn.{column}", value)
            if problem is None and not re.fullmatch(COLUMN_PATTERN, column):
                problem = f"{BY_COLUMN_MESSAGE}; got {column!r}"
        if problem is not None:
            raise ValueError(problem)
        if self.columns and not set(self.max_changed_rows_by_column) <= set(self.columns):
            raise ValueError(DIFF_COLUMNS_MESSAGE)
        if len(set(self.columns)) != len(self.columns):
            raise ValueError("cutover.checks.diff.columns: names must be unique")
        return self


class CutoverChecks(ApiModel):
    """What a candidate must prove about its index before readers see it.

    Run against the candidate once its lag gate holds, re-run every intervalSeconds until the
    switch; any failing check (or one that cannot run) blocks the cutover, the view is
    Degraded and the active index keeps serving. Changing checks never replays.
    """

    row_count: Annotated[RowCountCheck | None, Field(
        description="Row-count parity with the active index, for revisions whose primary key "
                    "is unchanged (skipped otherwise, and for a view's first revision).")] = None
    key_sample: Annotated[KeySampleCheck | None, Field(
        description="Key-set parity on sampled keys, for revisions whose primary key is "
                    "unchanged (skipped otherwise, and for a view's first revision).")] = None
    diff: Annotated[DiffCheck | None, Field(
        description="A value-level diff with the active index, for revisions whose primary "
                    "key is unchanged (skipped otherwise, and for a view's first revision).")
                    ] = None
    assertions: Annotated[list[SqlAssertion], Field(
        max_length=32, json_schema_extra={"x-kubernetes-list-type": "map",
                                          "x-kubernetes-list-map-keys": ["name"]},
        description="The team's SQL assertions (names unique).")] = []
    interval_seconds: Annotated[int, Field(
        ge=1, le=3600, description="Checks are re-run this often while the candidate waits "
                                   "(failing, or awaiting promotion).")] = 30
    timeout_seconds: Annotated[int, Field(
        ge=1, le=3600, description="Statement timeout of the row-count and key-sample "
                                   "queries.")] = 60

    @model_validator(mode="after")
    def _unique_names(self) -> CutoverChecks:
        names = [a.name for a in self.assertions]
        if len(set(names)) != len(names):
            raise ValueError(ASSERTION_NAMES_MESSAGE)
        return self

    def configured(self) -> bool:
        return bool(self.row_count or self.key_sample or self.diff or self.assertions)


class Cutover(ApiModel):
    """When readers switch to a new revision. Policy only: not part of the revision.

    The gate holds while the candidate is within `maxLagMessages` of the log OR its oldest
    missing record is at most `maxLagSeconds` old (staleness), so it holds on a topic that
    keeps receiving records (where the lag in messages is rarely 0 twice in a row) and never
    on a backlog of old records.
    """

    model_config = ConfigDict(json_schema_extra=cel((CUTOVER_RULE, CUTOVER_MESSAGE),
                                                    (PROGRESS_RULE, PROGRESS_MESSAGE)))

    max_lag_messages: Annotated[int, Field(
        ge=0, le=MAX_COUNT, description="Gate: the candidate's total lag (messages not yet committed into its "
                          "index) is at or under this, or ...")] = 0
    max_lag_seconds: Annotated[int, Field(
        ge=0, le=86400,
        description="... its staleness is at or under this many seconds: the oldest record "
                    "not yet in its index (by Kafka timestamp) is at most this old, so readers "
                    "see every record older than this. Producer-set timestamps in the past "
                    "hold the gate until those records are in; ones far ahead of the "
                    "operator's clock make staleness unknown (the message gate still holds). "
                    "0 gates on messages alone.")] = 10
    stable_for_seconds: Annotated[int, Field(
        ge=0, le=86400, description="The gate must hold continuously for this many seconds before "
                                   "readers move from a serving revision to another; a view's "
                                   "first revision serves as soon as the gate holds.")
                                  ] = 10
    mode: Annotated[Literal["auto", "manual"], Field(
        description="`auto` switches readers as soon as the gate has held; `manual` waits for "
                    "the annotation derivedviews.io/promote=<revision>. A view's first revision "
                    "is promoted when it catches up in both modes.")] = "auto"
    progress_deadline_seconds: Annotated[int, Field(
        ge=1, le=WEEK_SECONDS, description="A candidate that is behind and has committed no batch for this long "
                          "(counted from its start before its first batch) is torn down "
                          "(Degraded, reason ProgressDeadlineExceeded); the active revision "
                          "keeps serving. A slow but progressing replay is never torn down. "
                          "At most a week.")
                                         ] = 600
    deadline_seconds: Annotated[int | None, Field(
        ge=1, le=MAX_RETAIN_SECONDS, description="Optional cap on a candidate's age: not promoted this long after its "
                          "job started, it is torn down (Degraded, reason DeadlineExceeded) even "
                          "while progressing. Unset by default: big topics take as long as "
                          "they take. Applies in manual mode too. At most 30 days.")] = None
    min_rows: Annotated[int | None, Field(
        ge=1, le=MAX_COUNT,
        description="A view's first revision is not served before its index holds at least "
                    "this many rows (documents), as the sink counts them cheaply "
                    "(PostgreSQL's live-row statistics, OpenSearch's count): a gate against "
                    "serving an index that is nearly empty for a reason the lag cannot see "
                    "(a wrong topic, a filter that drops everything). Later revisions compare "
                    "with the serving index instead (checks.rowCount). Unset: no minimum.")
                        ] = None
    checks: Annotated[CutoverChecks | None, Field(
        description="Checks the candidate's index must pass before the switch (row-count and "
                    "key-set parity with the active index, SQL assertions). Policy: changing "
                    "them re-runs them, never replays.")] = None
    retain_previous_seconds: Annotated[int, Field(
        ge=0, le=MAX_RETAIN_SECONDS,
        description="After a cutover, the previous index is kept this long so that "
                    "reverting the spec resumes it instead of replaying (at most 30 days).")
                                       ] = 600
    keep_previous_running_seconds: Annotated[int, Field(
        ge=0, le=86400,
        description="After a cutover, the previous revision's job keeps following the log for "
                    "this long (at most retainPreviousSeconds), so that reverting the spec "
                    "switches readers back at once, without waiting for a job to start; 0 "
                    "stops it at the cutover. It costs that job's resources meanwhile.")] = 300

    @model_validator(mode="after")
    def _stable_before_deadlines(self) -> Cutover:
        if self.deadline_seconds is not None and self.stable_for_seconds >= self.deadline_seconds:
            raise ValueError(CUTOVER_MESSAGE)
        if self.stable_for_seconds >= self.progress_deadline_seconds:
            raise ValueError(PROGRESS_MESSAGE)
        return self


class DriverResources(ApiModel):
    """Resources of the Spark driver (it also writes every row to PostgreSQL)."""

    cores: Annotated[int, Field(ge=1, le=64, description=(
        "CPU cores of the driver; with no executors (spec.spark.executor.instances 0, the "
        "default) also its task threads."))] = 1
    memory: Annotated[str, Field(max_length=32, pattern=SPARK_MEMORY_PATTERN,
                                 description="Driver memory in Spark's notation, e.g. 1g or "
                                             "512m.")] = "1g"


class ExecutorResources(ApiModel):
    """Resources of the Spark executors."""

    instances: Annotated[int, Field(
        ge=0, le=1000,
        description="Executors of the serving (steady) stage. 0, the default, runs its tasks "
                    "in the driver pod (Spark's local mode, spec.spark.driver.cores threads): "
                    "no executor pods, the least a serving view costs. A replay stage runs "
                    "executors still (spec.spark.replay).")] = 0
    cores: Annotated[int, Field(ge=1, le=64, description="CPU cores per executor.")] = 1
    memory: Annotated[str, Field(max_length=32, pattern=SPARK_MEMORY_PATTERN,
                                 description="Memory per executor in Spark's notation, e.g. 2g.")
                      ] = "1g"


class ReplayExecutors(ApiModel):
    """The executors of a job's replay stage."""

    instances: Annotated[int, Field(
        ge=1, le=1000, description="Number of executors while the job replays its backlog "
                                   "(cores and memory: spec.spark.executor's).")]


class Replay(ApiModel):
    """A job's replay stage: while its revision builds a backlog (core.job.stages)."""

    executor: Annotated[ReplayExecutors | None, Field(
        description="Executors of the replay stage; unset, the installation derives them "
                    "from the backlog (records to read per executor, up to its maximum).")
                        ] = None


class RestartPolicy(ApiModel):
    """The Spark Operator's restart policy; a job is Failed only once these retries are spent."""

    type: Annotated[Literal["Never", "OnFailure", "Always"], Field(
        description="Never, OnFailure (retry up to onFailureRetries) or Always.")] = "OnFailure"
    on_failure_retries: Annotated[int, Field(
        ge=0, le=1000, description="Retries before the job counts as failed (OnFailure).")] = 3
    on_failure_retry_interval: Annotated[int, Field(
        ge=1, le=86400, description="Seconds between retries.")] = 10


class Spark(ApiModel):
    """How the replay job runs. Never part of the revision: changing it does not replay.

    A job's SparkApplication is never edited: a change here (or to the Kafka
    connection) deletes the running jobs and recreates them from their checkpoints.
    """

    image: Annotated[str | None, Field(
        min_length=1, max_length=1024,
        description="Spark job image; defaults to the operator's setting. At most 1024 "
                    "characters (a registry, a repository, a tag and a digest).")] = None
    main_application_file: Annotated[str | None, Field(
        min_length=1, max_length=4096, description="The job's entry point; defaults to the operator's setting "
                                  "(local:///opt/derived-views/spark_templates/"
                                  "derived_view_job.py).")] = None
    spark_version: Annotated[str, Field(
        min_length=1, max_length=64, description="Spark version of the image.")] = "4.0.0"
    driver: Annotated[DriverResources, Field(
        json_schema_extra=object_default(), description="Driver resources.")] = DriverResources()
    executor: Annotated[ExecutorResources, Field(
        json_schema_extra=object_default(), description="Executor resources.")
                        ] = ExecutorResources()
    replay: Annotated[Replay | None, Field(
        description="The replay stage: a revision whose backlog reaches the installation's "
                    "threshold replays with more executors, then restarts from its checkpoint "
                    "with spec.spark.executor once its backlog is in its index, before readers "
                    "switch. Changing it restarts only a job in its replay stage.")] = None
    spark_conf: Annotated[dict[str, Annotated[str, Field(max_length=SPARK_CONF_MAX_VALUE)]], Field(
        max_length=SPARK_CONF_MAX_KEYS,
        json_schema_extra=cel((SPARK_CONF_KEYS_RULE, SPARK_CONF_KEYS_MESSAGE),
                              *((spark_conf_rule(keys), spark_conf_message(keys, instead))
                                for keys, instead in SPARK_CONF_DENIED)),
        description="Spark configuration, merged over the operator's defaults "
                    "(spark.sql.shuffle.partitions: the job's task slots when a revision's "
                    "checkpoint is created, its aggregate's state partitions from then on; "
                    "...). Keys the Spark Operator sets itself "
                    "or denies (spark.master, images, service accounts, resources, ...) are "
                    "refused, naming the field to use instead. At most 256 entries, keys of at "
                    "most 256 and values of at most 4096 characters.")] = {}

    @field_validator("spark_conf")
    @classmethod
    def _spark_conf_allowed(cls, conf: dict[str, str]) -> dict[str, str]:
        if any(len(k) > SPARK_CONF_MAX_KEY for k in conf):
            raise ValueError(SPARK_CONF_KEYS_MESSAGE)
        for keys, instead in SPARK_CONF_DENIED:
            if any(k in conf for k in keys):
                raise ValueError(spark_conf_message(keys, instead))
        return conf

    restart_policy: Annotated[RestartPolicy, Field(
        json_schema_extra=object_default(), description="Retries of a failing job.")
                              ] = RestartPolicy()
    service_account: Annotated[str | None, Field(
        min_length=1, max_length=253, description="Service account of the driver; defaults to the operator's "
                                  "setting.")] = None
    checkpoint_base: Annotated[str | None, Field(
        min_length=1, max_length=1024, description="Where jobs keep their checkpoints, e.g. s3a://bucket/dv or a "
                                  "directory; each revision uses "
                                  "<checkpointBase>/<namespace>/<view>/<revision>. Defaults to "
                                  "the operator's setting. A running revision keeps the "
                                  "location it started with.")] = None


SQL_CHECKS_RULE = ("!has(self.sink.opensearch) || !has(self.cutover.checks) || "
                   "!has(self.cutover.checks.assertions) || "
                   "size(self.cutover.checks.assertions) == 0")
SQL_CHECKS_MESSAGE = ("cutover.checks.assertions are PostgreSQL queries: an OpenSearch sink "
                      "takes rowCount and keySample only")


class DerivedViewSpec(ApiModel):
    """Desired state of a derived view.

    The content fields (topics, format, value schema, transform, sink table,
    sink schema, primary key) define a revision; everything else is policy or
    connection detail and never triggers a replay.
    """

    model_config = ConfigDict(json_schema_extra=cel((SQL_CHECKS_RULE, SQL_CHECKS_MESSAGE)))

    source: Annotated[Source, Field(description="The Kafka topics the view is computed from.")]
    transform: Annotated[Transform, Field(description="How events become rows.")]
    sink: Annotated[Sink, Field(description="Where the indexes and the alias live.")]
    cutover: Annotated[Cutover, Field(
        # The full default, not {}: the API server checks a default against the CEL rule
        # without filling the nested defaults first.
        json_schema_extra={"default": Cutover().model_dump(mode="json", exclude_none=True)},
        description="When and how readers switch to a new revision.")] = Cutover()
    spark: Annotated[Spark, Field(
        json_schema_extra=object_default(),
        description="How the replay job runs; changing it never replays.")] = Spark()
    deletion_policy: Annotated[Literal["Retain", "Delete"], Field(
        description="On deletion of the view, jobs are always stopped; Retain keeps the alias "
                    "and the indexes, Delete drops them.")] = "Retain"

    @model_validator(mode="after")
    def _checks_fit_the_sink(self) -> DerivedViewSpec:
        checks = self.cutover.checks
        if self.sink.opensearch is not None and checks is not None and checks.assertions:
            raise ValueError(SQL_CHECKS_MESSAGE)
        return self
