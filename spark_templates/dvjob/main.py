"""Wire the stages into one streaming query and run it until stopped or done.

Everything that can be checked before reading Kafka is checked first (config,
schema DDL, transform, output columns, PostgreSQL tables), so a broken view
fails in seconds with one line saying why.  The last line of a failed run
starts with "dvjob: error:"; the cause after it is also the container's
termination message (see errors.write_termination_message).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import traceback
from collections.abc import Sequence

from pyspark import SparkConf, SparkContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.readwriter import DataStreamWriter

from dvjob.batch_progress import (
    PROGRESS_CONF,
    ProgressReporter,
    active_stage_inputs,
    progress_setting,
)
from dvjob.batch_writer import BatchWriter
from dvjob.checkpoint import HadoopPaths, set_aside_if_stale
from dvjob.config import JobConfig, TriggerConfig, config_from_argv
from dvjob.credentials import job_credentials
from dvjob.errors import JobError, one_line, write_termination_message
from dvjob.failpoints import BEFORE_COMMIT_CONF, Failpoint
from dvjob.first_batch import (
    FIRST_BATCH_CONF,
    first_batch_bound,
    first_batch_setting,
    run_first_batch,
)
from dvjob.placement import PYTHON_DAEMON_CONF, in_driver_master, one_staging_task
from dvjob.sinks.registry import BULK_LOAD_CONF, bulk_load_setting, open_sink
from dvjob.sinks.schema import table_layout
from dvjob.source.avro_reader import avro_start
from dvjob.source.bad_records import BadRecordScreen
from dvjob.source.changelog import refuse_changelog_aggregates
from dvjob.source.load import kafka_reader_options, load_kafka_stream, redacted
from dvjob.source.parse import parse_events, value_schema
from dvjob.sql import guard as sql_guard
from dvjob.transform import apply_transform

STATE_PARTITIONS_KEY = "spark.sql.shuffle.partitions"
"""Unless the submitter sets it (the operator does): the job's task slots, see build_session."""

# Applied only when the submitter's Spark configuration does not set them.
DEFAULT_SPARK_CONF = {
    # The same revision must build the same index on any machine: parse
    # zone-less timestamps as UTC, not as the driver's local time.
    "spark.sql.session.timeZone": "UTC",
}


def say(message: str) -> None:
    print(f"dvjob: {message}", flush=True)


def fail(cause: str) -> None:
    """The last line of a failed run, also left as the container's termination message."""
    write_termination_message(cause)
    say(f"error: {cause}")


def build_session(config: JobConfig) -> SparkSession:
    builder = SparkSession.builder.appName(f"dv-{config.view}-{config.revision}")
    # What spark-submit was given, before a context exists: a SparkConf reads it from the
    # JVM, which PySpark starts (or joins, under spark-submit) only when asked to.
    SparkContext._ensure_initialized()
    submitted = SparkConf()
    master = in_driver_master(lambda key: submitted.get(key, None))
    if master is not None:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    if master is not None:
        say(f"running tasks in the driver ({spark.sparkContext.master})")
    given = spark.sparkContext.getConf()
    # A view's batches are small next to Spark's default of 200 shuffle partitions, and an
    # aggregate's state has as many, each a task and a checkpoint file every batch: one per
    # task slot, as the operator renders it (derived_views.core.job.stages).
    defaults = {STATE_PARTITIONS_KEY: str(spark.sparkContext.defaultParallelism),
                **DEFAULT_SPARK_CONF}
    for key, value in defaults.items():
        if not given.contains(key):
            spark.conf.set(key, value)
    for key, value in sql_guard.NO_SUBSTITUTION.items():
        spark.conf.set(key, value)  # whatever the author's sparkConf says
    return spark


def with_trigger(writer: DataStreamWriter, trigger: TriggerConfig) -> DataStreamWriter:
    if trigger.available_now:
        return writer.trigger(availableNow=True)
    assert trigger.processing_time_seconds is not None
    millis = max(1, round(trigger.processing_time_seconds * 1000))
    return writer.trigger(processingTime=f"{millis} milliseconds")


def run(spark: SparkSession, config: JobConfig) -> None:
    """Start the query and block until it ends (availableNow) or is stopped."""
    context = spark.sparkContext
    submitted = context.getConf()  # a copy of the context's settings, made once
    credentials = job_credentials(config, submitted.get)
    hadoop = context._jsc.hadoopConfiguration()
    for key, value in credentials.hadoop.items():  # before any file system is opened
        hadoop.set(key, value)
    options = kafka_reader_options(config.source, credentials.kafka,
                                   min_partitions=2 * context.defaultParallelism)
    say(f"view {config.view} revision {config.revision}: reading "
        f"{json.dumps(redacted(options), sort_keys=True)}")
    schema = value_schema(config.source.schema_ddl)
    policy = config.source.bad_records
    avro = avro_start(spark, config, credentials.registry, schema)

    def transformed(reader_options: dict[str, str]) -> DataFrame:
        events = parse_events(load_kafka_stream(spark, reader_options), schema,
                              config.source.format, policy.policy,
                              avro.decoding if avro else None)
        return apply_transform(config.transform, events)

    output = transformed(options)
    refuse_changelog_aggregates(output, config.source.format)
    layout = table_layout(output.schema, config.sink.primary_key)
    failpoint = Failpoint(spark.conf.get(BEFORE_COMMIT_CONF, None) or None)
    sink = open_sink(config, layout, credentials,
                     before_commit=(lambda _batch: failpoint.hold(config.revision))
                     if failpoint.path else None,
                     bulk_load=bulk_load_setting(spark.conf.get(BULK_LOAD_CONF, None)))
    say(f"writing {sink.describe()}")
    sink.prepare()
    committed = sink.committed_batches()
    moved = set_aside_if_stale(HadoopPaths(spark), config.checkpoint_location,
                               committed, dt.datetime.now(dt.timezone.utc))
    if moved is not None:
        say(f"checkpoint {config.checkpoint_location} has committed batches but the ledger has "
            f"none for revision {config.revision} (index dropped or database reset): moved it "
            f"to {moved}; replaying from offset 0")
    screen = BadRecordScreen(
        spark=spark, policy=policy.policy, dead_letter_topic=policy.dead_letter_topic,
        reader_options=options, schema=schema, fmt=config.source.format, view=config.view,
        revision=config.revision, checkpoint_location=config.checkpoint_location,
        columns=layout.column_names, avro=avro.decoding if avro else None)
    say(f"bad records: {policy.policy}" + (f" to topic {policy.dead_letter_topic}"
                                           if policy.dead_letter_topic else ""))
    progress = ProgressReporter(sink, lambda: active_stage_inputs(spark), say,
                                every=progress_setting(spark.conf.get(PROGRESS_CONF, None)))
    writer = BatchWriter(sink=sink, layout=layout,
                         checkpoint_location=config.checkpoint_location, bad=screen,
                         progress=progress,
                         one_task=one_staging_task(context.defaultParallelism,
                                                   submitted.get(PYTHON_DAEMON_CONF)))

    def stream(frame: DataFrame) -> DataStreamWriter:
        return (frame.writeStream.outputMode("update")
                .option("checkpointLocation", config.checkpoint_location)
                .foreachBatch(writer))

    bound = first_batch_bound(config, committed,
                              first_batch_setting(spark.conf.get(FIRST_BATCH_CONF, None)))

    def run_queries() -> None:
        if bound is not None:
            failed = run_first_batch(lambda most, interval: stream(transformed(
                {**options, "maxOffsetsPerTrigger": str(most)})).trigger(
                    processingTime=interval).start(), say, bound)
            if failed is not None:
                raise writer.failure or RuntimeError(failed)
        query = with_trigger(stream(transformed(options)), config.trigger).start()
        say(f"query {query.id} started")
        try:
            query.awaitTermination()
        except Exception:
            if writer.failure is not None:
                raise writer.failure from None
            raise

    progress.start()
    try:
        while True:
            try:
                run_queries()
                break
            except Exception as exc:
                if avro is None or not avro.learn_from(exc, say):
                    raise
                screen.avro = avro.decoding
                bound = None  # the first batch is committed or replays from the checkpoint
    finally:
        progress.stop()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        config = config_from_argv(sys.argv[1:] if argv is None else argv)
        spark = build_session(config)
    except JobError as exc:
        fail(str(exc))
        return 2
    try:
        run(spark, config)
    except JobError as exc:
        fail(str(exc))
        return 1
    except Exception as exc:
        traceback.print_exc()
        fail(one_line(exc))
        return 1
    finally:
        spark.stop()
    say("done")
    return 0
