"""benchmarks/replay_rate.py: ConsumerPerformance's output, the COPY baseline's table, the
ratios, goals and ceilings each result point carries, and the Avro twins of the shapes."""

from __future__ import annotations

import datetime as dt
import io
import json
from collections.abc import Callable
from types import ModuleType
from typing import Any

import fastavro
import pytest

# ConsumerPerformance (Kafka 4.1) as it prints: the header, then one summary line; dates
# carry a space, fields are separated by ", ".
OUTPUT = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n"
    "2026-11-27 09:47:54:487, 2026-11-27 09:47:55:831, 19.4257, 14.4536, 200000, "
    "148809.5238, 688, 656, 29.6124, 304878.0488\n")


@pytest.fixture(scope="module")
def rr(bench_script: Callable[[str], ModuleType]) -> ModuleType:
    return bench_script("replay_rate")


def test_consumer_perf_summary_is_read_by_the_header_s_names(rr: ModuleType) -> None:
    summary = rr.parse_consumer_perf("SLF4J: a warning on the same stream\n" + OUTPUT)
    assert summary["nMsg.sec"] == pytest.approx(148809.5238)
    assert summary["fetch.nMsg.sec"] == pytest.approx(304878.0488)
    assert summary["data.consumed.in.nMsg"] == 200000
    figures = rr.consumer_perf_figures(summary, 200_000)
    assert figures == {"consumer_perf_events_per_s": 148810, "consumer_perf_mb_per_s": 14.5,
                       "consumer_perf_fetch_events_per_s": 304878,
                       "consumer_perf_fetch_ms": 656, "consumer_perf_rebalance_ms": 688}


def test_a_timeout_warning_between_header_and_summary_is_skipped_and_refused(
        rr: ModuleType) -> None:
    header, summary = OUTPUT.splitlines()
    warned = (f"{header}\nWARNING: Exiting before consuming the expected number of messages: "
              f"timeout (30000 ms) exceeded. You can use the --timeout option to increase the "
              f"timeout.\n{summary}\n")
    parsed = rr.parse_consumer_perf(warned)
    assert parsed["data.consumed.in.nMsg"] == 200000
    with pytest.raises(RuntimeError, match="read 200000 of 300000 records"):
        rr.consumer_perf_figures(parsed, 300_000)


@pytest.mark.parametrize("output", ["", "Exception in thread main\n",
                                    OUTPUT.splitlines()[0] + "\n"])
def test_output_without_a_summary_is_an_error(rr: ModuleType, output: str) -> None:
    with pytest.raises(ValueError, match="ConsumerPerformance"):
        rr.parse_consumer_perf(output)


def test_the_better_run_is_kept_with_every_run_s_rate(rr: ModuleType) -> None:
    first = {"consumer_perf_events_per_s": 1_400_000, "consumer_perf_mb_per_s": 150.0}
    second = {"consumer_perf_events_per_s": 1_650_000, "consumer_perf_mb_per_s": 170.0}
    assert rr.best_run([first, second]) == {**second,
                                            "consumer_perf_runs": [1_400_000, 1_650_000]}


def test_the_copy_baseline_table_is_the_job_s_mirror_index(rr: ModuleType) -> None:
    layout = rr.mirror_layout()
    assert [(c.name, c.pg_type) for c in layout.columns] == [
        ("order_id", "text"), ("customer_id", "text"), ("amount", "double precision"),
        ("ts", "timestamptz")]
    assert layout.primary_key == ("order_id",)
    orders = [{"order_id": "o-7-0", "customer_id": "c-0042", "amount": 12.25,
               "ts": "2026-01-01T00:00:01"}]
    assert rr.copy_text(orders) == b"o-7-0\tc-0042\t12.25\t2026-01-01 00:00:01.000000+00:00\n"


def ledger_row(batch: int, offsets: list[int], at: float) -> tuple[int, dict[str, Any],
                                                                    dt.datetime]:
    committed = dt.datetime(2026, 11, 27, tzinfo=dt.UTC) + dt.timedelta(seconds=at)
    return batch, {"t": {str(p): o for p, o in enumerate(offsets)}}, committed


def test_profile_means_the_steady_batches_and_their_records(rr: ModuleType) -> None:
    ledger = [ledger_row(0, [100, 100, 100], 10.0), ledger_row(1, [200, 200, 200], 14.0),
              ledger_row(2, [250, 250, 250], 16.0)]
    timings = [{"batch": 0, "stage_seconds": 9.0, "transaction_seconds": 1.0},
               {"batch": 1, "stage_seconds": 2.0, "transaction_seconds": 1.0},
               {"batch": 2, "stage_seconds": 1.0, "transaction_seconds": 0.5}]
    assert rr.profile(ledger, timings) == {
        "batches": 2, "records_per_batch": 225, "seconds_per_batch": 3.0,
        "staging_seconds": 1.5, "merge_transaction_seconds": 0.75, "other_seconds": 0.75}


def point(shape: str, **figures: Any) -> dict[str, Any]:
    return {"shape": shape, "consumer_perf_events_per_s": 1_600_000,
            "copy_ingest_rows_per_s": 300_000, "raw_consume_events_per_s": 166_000,
            "replay_events_per_s_steady": 240_000, **figures}


def test_ratios_are_against_each_baseline_and_none_without_a_steady_rate(
        rr: ModuleType) -> None:
    assert rr.ratios(point("aggregate")) == {
        "ratio_vs_spark_batch": None, "ratio_vs_spark_batch_ranges": None,
        "ratio_vs_spark_batch_cold": None,
        "ratio_vs_consumer_perf": 0.15, "ratio_vs_copy": 0.8, "ratio_vs_jdbc_sink": None,
        "ratio_vs_raw": 1.446}
    assert set(rr.ratios(point("aggregate", replay_events_per_s_steady=None)).values()) == {None}
    assert rr.ratios(point("mirror", copy_ingest_rows_per_s=None))["ratio_vs_copy"] is None


def test_each_shape_is_judged_on_its_own_baseline(rr: ModuleType) -> None:
    aggregate = rr.judged(point("aggregate"))
    assert aggregate["goal"] == {"baseline": "ConsumerPerformance", "at_least": 0.25,
                                 "ratio": 0.15, "needed_events_per_s": 400_000, "met": False}
    mirror = rr.judged(point("mirror"))
    assert mirror["goal"] == {"baseline": "COPY ingest", "at_least": 0.6, "ratio": 0.8,
                              "needed_events_per_s": 180_000, "met": True}
    assert rr.judged(point("mirror", replay_events_per_s_steady=None))["goal"]["met"] is None
    assert rr.goal(point("other")) is None


def test_a_point_with_spark_s_batch_job_is_judged_against_it_too(rr: ModuleType) -> None:
    judged = rr.judged(point("aggregate", spark_batch_events_per_s=200_000,
                             spark_batch_ranges_events_per_s=300_000))
    assert (judged["ratio_vs_spark_batch"], judged["ratio_vs_spark_batch_ranges"]) == (1.2, 0.8)
    assert judged["batch_goal"] == {"baseline": "Spark's batch job", "at_least": 1.0,
                                    "ratio": 1.2, "needed_events_per_s": 200_000, "met": True}
    assert judged["goal"]["baseline"] == "ConsumerPerformance"  # issue 29's goal is kept
    slower = rr.judged(point("mirror", spark_batch_events_per_s=250_000))
    assert slower["batch_goal"]["met"] is False
    assert "batch_goal" not in rr.judged(point("mirror"))  # not measured: not judged


def test_the_mirror_is_judged_against_debezium_s_jdbc_sink(rr: ModuleType) -> None:
    judged = rr.judged(point("mirror", jdbc_sink_events_per_s=300_000))
    assert judged["ratio_vs_jdbc_sink"] == 0.8
    assert judged["sink_goal"] == {"baseline": "Debezium's JDBC sink", "at_least": 1.0,
                                   "ratio": 0.8, "needed_events_per_s": 300_000, "met": False}
    assert judged["goal"]["baseline"] == "COPY ingest"  # issue 29's goal is kept
    assert "sink_goal" not in rr.judged(point("mirror"))  # not measured: not judged


def test_the_batch_job_gets_the_kafka_source_and_postgres_jdbc_driver(
        rr: ModuleType, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    plugins = tmp_path / "plugins" / "debezium-connector-postgres"
    plugins.mkdir(parents=True)
    (plugins / "postgresql-42.7.7.jar").write_bytes(b"")
    monkeypatch.setattr(rr.kafka_connect, "plugin_path", lambda libs: tmp_path / "plugins")
    monkeypatch.setattr(rr.artefacts, "kafka_connect_libs", lambda settings: tmp_path / "libs")
    monkeypatch.setattr(rr.artefacts, "spark_kafka_jars",
                        lambda settings: [tmp_path / "spark-sql-kafka.jar"])
    assert [p.name for p in rr.batch_jars(None)] == ["spark-sql-kafka.jar",
                                                     "postgresql-42.7.7.jar"]
    (plugins / "postgresql-42.7.7.jar").unlink()
    with pytest.raises(RuntimeError, match="no PostgreSQL JDBC driver"):
        rr.batch_jars(None)


def test_ceilings_are_records_per_batch_over_each_phase_and_judged_against_the_goal(
        rr: ModuleType) -> None:
    judged = rr.judged(point("mirror", profile={
        "batches": 3, "records_per_batch": 250_000, "seconds_per_batch": 2.5,
        "staging_seconds": 0.5, "merge_transaction_seconds": 2.0, "other_seconds": 0.0}))
    assert [(c["phase"], c["seconds"], c["ceiling_events_per_s"], c["below_goal"])
            for c in judged["ceilings"]] == [("staging", 0.5, 500_000, False),
                                             ("merge", 2.0, 125_000, True)]
    assert "PostgreSQL" in judged["ceilings"][1]["what"]
    assert rr.judged(point("mirror"))["ceilings"] == []  # no profile: nothing to imply


# --- the Avro shapes -----------------------------------------------------------------------------

def test_each_json_shape_has_an_avro_twin_with_its_sql_and_key(rr: ModuleType) -> None:
    for name in ("aggregate", "mirror"):
        json_shape, twin = rr.SHAPES[name], rr.SHAPES[f"{name}-avro"]
        assert (twin.format, twin.twin) == ("avro", name)
        assert (twin.sql, twin.primary_key) == (json_shape.sql, json_shape.primary_key)
        assert json_shape.format == "json" and json_shape.twin is None
    assert rr.goal(point("mirror-avro")) is None  # the goals are issue 29's, set for JSON


def test_the_avro_topic_holds_the_json_events_in_the_confluent_wire_format(
        rr: ModuleType) -> None:
    from dvstack.testing import avro_orders, replay

    event = replay.make_orders(2)[1]
    value = avro_orders.encoder(42, avro_orders.ORDER_EVENT)(avro_orders.avro_order(event))
    assert value[:5] == b"\x00\x00\x00\x00\x2a"  # magic byte 0, schema id 42 big-endian
    decoded = fastavro.schemaless_reader(io.BytesIO(value[5:]),
                                         fastavro.parse_schema(avro_orders.ORDER_EVENT), None)
    assert decoded == {"order_id": event["order_id"], "customer_id": event["customer_id"],
                       "amount": event["amount"],
                       "ts": dt.datetime(2026, 1, 1, 0, 0, 1, tzinfo=dt.UTC)}
    assert avro_orders.wire(42, avro_orders.ORDER_EVENT, avro_orders.avro_order(event)) == value
    assert json.loads(rr.AVRO_READER) == avro_orders.ORDER_EVENT


def test_an_avro_application_reads_avro_with_the_registry_mounted_in_the_driver_alone(
        rr: ModuleType) -> None:
    from dvjob.config import parse_config
    from dvstack.testing import replay

    app = replay.spark_application(
        name="bench-1", namespace="bench", revision="bench1", view="bench/mirror-avro",
        bootstrap="127.0.0.1:9092", topics=["t-avro"], sql=rr.SHAPES["mirror"].sql,
        table="bench__bench1", primary_key=["order_id"], secret="views-db",
        checkpoint="ckpt", image_app_root="app", max_offsets_per_trigger=1000)
    before = json.dumps(app)
    avro = rr.as_avro(app, rr.AVRO_READER, "views-db", "registry")
    assert json.dumps(app) == before  # the JSON twin's application is left as it was
    job = parse_config(avro["spec"]["arguments"][1])  # the job's own validation
    assert job.source.format == "avro"
    assert job.source.avro is not None and job.source.avro.reader_schema == rr.AVRO_READER
    assert job.source.schema_ddl == ("`order_id` STRING, `customer_id` STRING, "
                                     "`amount` DOUBLE, `ts` TIMESTAMP")
    assert job.secrets is not None
    assert (job.secrets.sink, job.secrets.registry) == ("views-db", "registry")
    assert job.source.max_offsets_per_trigger == 1000 and job.transform.sql == app_sql(app)
    assert [s["name"] for s in avro["spec"]["driver"]["secrets"]] == ["registry", "views-db"]
    assert [s["name"] for s in avro["spec"]["executor"]["secrets"]] == ["views-db"]


def app_sql(app: dict[str, Any]) -> str:
    return str(json.loads(app["spec"]["arguments"][1])["transform"]["sql"])


def test_avro_twins_replay_the_largest_size_only_with_the_headline_bound(
        rr: ModuleType) -> None:
    shapes = [rr.SHAPES[name] for name in ("aggregate", "mirror-avro", "mirror")]
    small = rr.planned_runs(shapes, 500_000, 4_000_000)
    assert [(s.name, bound, which) for s, bound, which in small] == [
        ("aggregate", 250_000, "linearity"), ("mirror", 250_000, "linearity")]
    largest = rr.planned_runs(shapes, 4_000_000, 4_000_000)
    assert [(s.name, bound, which) for s, bound, which in largest] == [
        ("aggregate", 250_000, "linearity"), ("mirror", 250_000, "linearity"),
        ("aggregate", 1_000_000, "headline"), ("mirror-avro", 1_000_000, "headline"),
        ("mirror", 1_000_000, "headline")]
    assert rr.planned_runs([rr.SHAPES["aggregate-avro"]], 500_000, 4_000_000) == []


def test_an_avro_point_carries_its_rate_over_its_json_twin_s(rr: ModuleType) -> None:
    points = [point("mirror", events=4_000_000, replay_events_per_s_steady=40_000),
              point("mirror-avro", twin="mirror", events=4_000_000,
                    replay_events_per_s_steady=50_000),
              point("aggregate-avro", twin="aggregate", events=4_000_000)]
    paired = rr.versus_json(points)
    assert "ratio_vs_json" not in paired[0]
    assert paired[1]["ratio_vs_json"] == 1.25
    assert paired[2]["ratio_vs_json"] is None  # its twin was not replayed
    assert "ratio_vs_json" not in points[1]  # the input is left as it was
