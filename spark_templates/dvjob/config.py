"""The job's configuration: the contract with the operator, validated on start.

The operator passes one JSON document (camelCase keys) with `--config-json`
or `--config-file`.  Unknown keys are rejected so that a typo in the operator
fails the job at once, naming the field, instead of being silently ignored.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from dvjob.errors import ConfigError

# PostgreSQL silently truncates longer identifiers (NAMEDATALEN - 1 bytes), which
# could make two revisions' tables collide: refuse them instead.
PG_IDENTIFIER_MAX_BYTES = 63

# Reader options the job owns: letting kafkaOptions override them would break
# the replay-from-genesis guarantee or the topic list.
RESERVED_KAFKA_OPTIONS = frozenset(
    {"subscribe", "subscribepattern", "assign", "startingoffsets", "kafka.bootstrap.servers",
     "startingtimestamp", "startingoffsetsbytimestamp", "endingoffsets"})

_PYTHON_REF = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def check_pg_identifier(name: str) -> str:
    """A name PostgreSQL stores exactly as given (we always quote it)."""
    if not name:
        raise ValueError("must not be empty")
    if "\x00" in name:
        raise ValueError("must not contain NUL characters")
    if len(name.encode()) > PG_IDENTIFIER_MAX_BYTES:
        raise ValueError(f"{name!r} is longer than PostgreSQL's limit of "
                         f"{PG_IDENTIFIER_MAX_BYTES} bytes for identifiers")
    return name


PgIdentifier = Annotated[str, AfterValidator(check_pg_identifier)]

# OpenSearch refuses longer index names (bytes of UTF-8).
OPENSEARCH_INDEX_MAX_BYTES = 255
_INDEX_NAME_FORBIDDEN = frozenset('\\/*?"<>| ,#:')


def check_opensearch_index(name: str) -> str:
    """An index name OpenSearch accepts as given: it never lowercases or rewrites one, it
    refuses it, and a refusal at start is clearer than one at the first batch."""
    if not name:
        raise ValueError("must not be empty")
    if name != name.lower():
        raise ValueError(f"{name!r}: OpenSearch index names must be lowercase")
    if name in (".", "..") or name[0] in "-_+":
        raise ValueError(f"{name!r}: OpenSearch index names cannot be '.' or '..' or start "
                         "with '-', '_' or '+'")
    bad = sorted({c for c in name if c in _INDEX_NAME_FORBIDDEN or ord(c) < 32})
    if bad:
        raise ValueError(f"{name!r}: OpenSearch index names cannot contain "
                         f"{' '.join(repr(c) for c in bad)}")
    if len(name.encode()) > OPENSEARCH_INDEX_MAX_BYTES:
        raise ValueError(f"{name!r} is longer than OpenSearch's limit of "
                         f"{OPENSEARCH_INDEX_MAX_BYTES} bytes for index names")
    return name


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=False,
                              validate_by_alias=True, extra="forbid", frozen=True, strict=True)


class BadRecordsConfig(_Model):
    """What the job does with a record it cannot turn into index rows (see dvjob.source.bad_records)."""

    policy: Literal["fail", "skip", "deadLetter"] = "fail"
    dead_letter_topic: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _topic_for_dead_letters(self) -> BadRecordsConfig:
        if (self.policy == "deadLetter") != (self.dead_letter_topic is not None):
            raise ValueError("deadLetterTopic is required with policy deadLetter, and only then")
        return self


class AvroConfig(_Model):
    """How `avro` values are read: each record decoded with its writer's schema (fetched by
    its id from the registry the `registry` Secret names) and resolved to `readerSchema`."""

    reader_schema: str = Field(min_length=2)
    """The reader schema's JSON text, pinned in the revision; `schema` is its Spark DDL."""


class SourceConfig(_Model):
    bootstrap_servers: str = Field(min_length=1)
    topics: list[str] = Field(min_length=1)
    format: Literal["json", "debezium", "avro"] = "json"
    schema_ddl: str = Field(alias="schema", min_length=1)
    avro: AvroConfig | None = None
    max_offsets_per_trigger: int | None = Field(default=None, gt=0)
    kafka_options: dict[str, str | int | float | bool] = Field(default_factory=dict)
    bad_records: BadRecordsConfig = Field(default_factory=BadRecordsConfig)

    @field_validator("topics")
    @classmethod
    def _topics(cls, topics: list[str]) -> list[str]:
        for topic in topics:
            if not topic or "," in topic or topic.strip() != topic:
                raise ValueError(f"{topic!r} is not a valid topic name")
        if len(set(topics)) != len(topics):
            raise ValueError("topics must not repeat")
        return topics

    @field_validator("kafka_options")
    @classmethod
    def _kafka_options(cls, options: dict[str, str | int | float | bool]
                       ) -> dict[str, str | int | float | bool]:
        reserved = sorted(k for k in options if k.lower() in RESERVED_KAFKA_OPTIONS)
        if reserved:
            raise ValueError(f"{', '.join(reserved)} cannot be set here: the job sets it")
        return options

    @model_validator(mode="after")
    def _avro_with_its_reader(self) -> SourceConfig:
        if (self.format == "avro" and self.avro is None) or (
                self.format == "json" and self.avro is not None):
            raise ValueError("avro (the reader schema) is required with format avro, allowed "
                             "with debezium (Debezium's Avro converter) and not with json")
        return self

    @model_validator(mode="after")
    def _dead_letters_elsewhere(self) -> SourceConfig:
        if self.bad_records.dead_letter_topic in self.topics:
            raise ValueError("badRecords.deadLetterTopic must not be one of the source topics "
                             "(the view would read its own dead letters)")
        return self


class TransformConfig(_Model):
    sql: str | None = Field(default=None, min_length=1)
    python: str | None = None

    @field_validator("python")
    @classmethod
    def _python(cls, ref: str | None) -> str | None:
        if ref is not None and not _PYTHON_REF.match(ref):
            raise ValueError(f"{ref!r} is not of the form 'package.module:function'")
        return ref

    @model_validator(mode="after")
    def _exactly_one(self) -> TransformConfig:
        if (self.sql is None) == (self.python is None):
            raise ValueError("give exactly one of 'sql' or 'python'")
        return self


class SinkConfig(_Model):
    """Where the revision's index and its ledger are.

    PostgreSQL: `table` and `ledgerTable` are tables in `schema`.  OpenSearch:
    `table` is the revision's index (`<index>__<revision>`) and `ledgerTable`
    the ledger index; `schema` has no meaning there.
    """

    kind: Literal["postgres", "opensearch"] = "postgres"  # which dvjob.sinks.registry module writes
    table: str
    db_schema: PgIdentifier = Field(default="public", alias="schema")
    primary_key: list[PgIdentifier] = Field(min_length=1)
    ledger_table: str = Field(default="dv_ledger", validate_default=True)

    @field_validator("table", "ledger_table")
    @classmethod
    def _name(cls, name: str, info: ValidationInfo) -> str:
        # `kind` is declared first, so it is validated (or absent, if invalid) by now.
        if info.data.get("kind") == "opensearch":
            return check_opensearch_index(name)
        return check_pg_identifier(name)

    @field_validator("primary_key")
    @classmethod
    def _unique(cls, columns: list[str]) -> list[str]:
        if len(set(columns)) != len(columns):
            raise ValueError("primary key columns must not repeat")
        if "_dv_deleted" in columns:
            raise ValueError("_dv_deleted is the delete flag and cannot be part of the key")
        return columns


class TriggerConfig(_Model):
    processing_time_seconds: float | None = Field(default=None, gt=0)
    available_now: Literal[True] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> TriggerConfig:
        if (self.processing_time_seconds is None) == (self.available_now is None):
            raise ValueError("give exactly one of 'processingTimeSeconds' or 'availableNow'")
        return self


class OwnerConfig(_Model):
    """The view that owns the revision's index: recorded when the job creates it, and an
    index recorded for any other view (another UID) is refused at start."""

    namespace: str = Field(min_length=1)
    name: str = Field(min_length=1)
    uid: str = Field(min_length=1)


class SecretsConfig(_Model):
    """The Secrets whose mounted files hold the job's credentials (dvjob.credentials), by
    the role each plays; names only, never values."""

    sink: str = Field(min_length=1)
    kafka: str | None = None
    checkpoint: str | None = None
    registry: str | None = None
    """The schema registry's Secret (`url`, optional `username`/`password`, `ca.crt`): with
    Avro values (source.avro)."""


class JobConfig(_Model):
    view: str = Field(min_length=1)
    owner: OwnerConfig | None = None
    """None only in configurations rendered before owners were recorded: such a job writes
    into an index with no recorded owner and refuses any index that has one."""
    revision: str = Field(min_length=1, max_length=128)
    source: SourceConfig
    transform: TransformConfig
    sink: SinkConfig
    checkpoint_location: str = Field(min_length=1)
    trigger: TriggerConfig
    secrets: SecretsConfig | None = None
    """None only in configurations rendered before Secrets were mounted: the job then reads
    its credentials from the environment those operators set."""

    @model_validator(mode="after")
    def _registry_for_avro(self) -> JobConfig:
        if self.source.avro is not None and (self.secrets is None
                                             or self.secrets.registry is None):
            raise ValueError("secrets.registry is required with Avro values (source.avro): "
                             "the job fetches each writer's schema from the registry")
        return self

    @field_validator("revision")
    @classmethod
    def _revision(cls, revision: str) -> str:
        if not _REVISION.match(revision):
            raise ValueError(f"{revision!r}: use letters, digits, '.', '_' or '-'")
        return revision


def _describe(exc: ValidationError) -> str:
    """One line per problem, each naming the field by its camelCase path."""
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "(document)"
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)


def flag_setting(key: str, value: str | None, default: bool) -> bool:
    """A true/false Spark setting of the job's own (unset: `default`); anything else is
    refused before any query starts."""
    if value is None or value.strip() == "":
        return default
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"{key} is {value!r}: give true or false")
    return text == "true"


def parse_config(text: str, *, origin: str = "--config-json") -> JobConfig:
    """Validate the JSON document; raise ConfigError naming every bad field."""
    try:
        return JobConfig.model_validate_json(text)
    except ValidationError as exc:
        raise ConfigError(f"invalid job configuration ({origin}): {_describe(exc)}") from None


def config_from_argv(argv: Sequence[str]) -> JobConfig:
    """`--config-json JSON` or `--config-file PATH`, exactly one of them."""
    parser = argparse.ArgumentParser(prog="derived_view_job.py",
                                     description="Replay Kafka topics into a derived view.")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--config-json", metavar="JSON", help="the job configuration")
    group.add_argument("--config-file", metavar="PATH", help="a file holding the configuration")
    args = parser.parse_args(list(argv))
    if args.config_json is not None:
        return parse_config(args.config_json)
    path = Path(args.config_file)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read --config-file {path}: {exc.strerror}") from None
    return parse_config(text, origin=f"--config-file {path}")
