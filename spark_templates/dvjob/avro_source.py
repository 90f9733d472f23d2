"""The driver's side of an Avro source: the writers known at start, and learning new ones.

`avro_start` fetches the writers registered under the topics' value subjects and checks
that `from_avro` reads the reader schema as the DDL the operator derived. When a query
stops at a schema id it does not know (dvjob.avro_decoding), `learn_from` fetches it and
the driver restarts the query from its checkpoint: the batch that stopped had committed
nothing, so it runs again, whole, with the id decoded or counted as bad.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dvjob.avro_decoding import (
    Decoding,
    check_reader_type,
    initial,
    resolution_cause,
    unknown_ids,
)
from dvjob.config import JobConfig
from dvjob.schema_registry import Registry, registry_from

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType


@dataclass
class AvroSource:
    registry: Registry
    resolve: Callable[[str, str], str | None]
    decoding: Decoding

    def learn_from(self, error: BaseException, say: Callable[[str], None]) -> bool:
        """Whether `error` is a query stopping at ids it did not know, now learnt."""
        ids = unknown_ids(error) - self.decoding.known()
        if not ids:
            return False
        self.decoding = self.decoding.learn(ids, self.registry, self.resolve)
        for schema_id in sorted(ids):
            what = ("decoded" if schema_id in self.decoding.writers else
                    "not in the registry: its records are bad"
                    if schema_id in self.decoding.missing else
                    "not resolvable to the reader schema: its records are bad")
            say(f"schema id {schema_id} met in the log: {what}; restarting the query from "
                "its checkpoint")
        return True


def avro_start(spark: SparkSession, config: JobConfig, registry_files: Mapping[str, str],
               schema: StructType) -> AvroSource | None:
    """None unless the source is Avro."""
    avro, secrets = config.source.avro, config.secrets
    if config.source.format != "avro" or avro is None or secrets is None or not secrets.registry:
        return None
    registry = registry_from(registry_files, secrets.registry)
    resolve = resolution_cause(spark)
    decoding = initial(avro.reader_schema, config.source.topics, registry, resolve)
    check_reader_type(spark, decoding, schema)
    print(f"dvjob: avro: {len(decoding.writers)} writer schema(s) registered under the "
          f"topics' value subjects resolve to the reader schema"
          + (f", {len(decoding.unresolvable)} do not" if decoding.unresolvable else ""),
          flush=True)
    return AvroSource(registry=registry, resolve=resolve, decoding=decoding)
