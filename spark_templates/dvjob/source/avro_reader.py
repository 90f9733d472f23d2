"""The driver's side of an Avro source: the writers known at start, and learning new ones.

`avro_start` fetches the writers registered under the topics' value subjects (and, for
Debezium's Avro converter, key subjects) and checks that `from_avro` reads the reader schema
as the DDL the operator derived. When a query
stops at a schema id it does not know (dvjob.source.avro_decoding), `learn_from` fetches it and
the driver restarts the query from its checkpoint: the batch that stopped had committed
nothing, so it runs again, whole, with the id decoded or counted as bad.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from dvjob.config import JobConfig
from dvjob.source.avro_decoding import (
    Decoding,
    check_reader_type,
    debezium_readers,
    initial,
    resolution_cause,
    unknown_ids,
)
from dvjob.source.schema_registry import Registry, registry_from

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
        learnt = False
        for role, schema_id in sorted(unknown_ids(error)):
            decoding = self.decoding if role == "value" else self.decoding.key
            if decoding is None or schema_id in decoding.known():
                continue
            decoding = decoding.learn({schema_id}, self.registry, self.resolve)
            self.decoding = (decoding if role == "value" else
                             replace(self.decoding, key=decoding))
            learnt = True
            what = ("decoded" if schema_id in decoding.writers else
                    "not in the registry: its records are bad"
                    if schema_id in decoding.missing else
                    "not resolvable to the reader schema: its records are bad")
            say(f"{role} schema id {schema_id} met in the log: {what}; restarting the query "
                "from its checkpoint")
        return learnt


def avro_start(spark: SparkSession, config: JobConfig, registry_files: Mapping[str, str],
               schema: StructType) -> AvroSource | None:
    """None unless the values are Avro (format avro, or debezium with `source.avro`)."""
    avro, secrets = config.source.avro, config.secrets
    if avro is None or secrets is None or not secrets.registry:
        return None
    registry = registry_from(registry_files, secrets.registry)
    resolve = resolution_cause(spark)
    topics = config.source.topics
    if config.source.format == "debezium":
        envelope, key = debezium_readers(avro.reader_schema)
        decoding = replace(initial(envelope, topics, registry, resolve),
                           key=initial(key, topics, registry, resolve, role="key"))
    else:
        decoding = initial(avro.reader_schema, topics, registry, resolve)
    check_reader_type(spark, decoding, schema)
    print(f"dvjob: avro: {len(decoding.writers)} writer schema(s) registered under the "
          f"topics' value subjects resolve to the reader schema"
          + (f", {len(decoding.unresolvable)} do not" if decoding.unresolvable else "")
          + (f"; {len(decoding.key.writers)} key schema(s)" if decoding.key else ""),
          flush=True)
    return AvroSource(registry=registry, resolve=resolve, decoding=decoding)
