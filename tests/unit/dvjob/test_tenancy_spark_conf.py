"""The tenancy policy's sparkConf allowlist (core/judges/tenancy.py) against Spark 4.0 itself: each
key is one Spark defines, Spark's own default value fits the key's shape, values of the shape
parse with Spark's own converter, and a codec key would take a class name (why codecs are
limited to Spark's short names)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from derived_views.core.judges.tenancy import CODECS, DEFAULT_SPARK_CONF_ALLOW, conf_rule

SAMPLES = {"bool": ["true", "false"], "int": ["8"], "number": ["0.5"],
           "size": ["64m", "1g", "10MB", "1048576"], "duration": ["30s", "500ms", "5min", "120"],
           "timezone": ["UTC", "Europe/Paris", "America/Argentina/Buenos_Aires", "+02:00"],
           "word": ["orders-team"]}
NETWORK_MODULE = {"spark.shuffle.io.maxRetries", "spark.shuffle.io.retryWait"}
"""Read by the network module's TransportConf (an int and a time string), not ConfigEntries."""


def known_configs(spark: SparkSession) -> Any:
    """Spark's registry of ConfigEntry by key (private to Spark: read by reflection)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    jvm.org.apache.spark.sql.internal.SQLConf.get()  # registers the SQL entries
    cls = jvm.java.lang.Class.forName("org.apache.spark.internal.config.ConfigEntry$")
    field = cls.getDeclaredField("knownConfigs")
    field.setAccessible(True)
    return field.get(cls.getField("MODULE$").get(None))


def test_every_allowed_key_is_sparks_and_its_values_parse_as_spark_reads_them(
        spark: SparkSession) -> None:
    known = known_configs(spark)
    problems = []
    for entry in DEFAULT_SPARK_CONF_ALLOW:
        rule = conf_rule(entry)
        config = known.get(rule.key)
        if config is None:
            if rule.key not in NETWORK_MODULE:
                problems.append(f"{rule.key}: Spark 4.0 defines no such key")
            continue
        default = config.defaultValueString()
        concrete = default != "<undefined>" and not default.startswith("<value of")
        if concrete and not rule.accepts(default):
            problems.append(f"{rule.key}: Spark's default {default!r} is not {rule.shape}")
        samples = SAMPLES.get(rule.shape) or rule.shape.split("|")
        for value in samples:
            assert rule.accepts(value), (rule.key, value)
            try:
                config.valueConverter().apply(value)
            except Exception as exc:  # Py4J raises whatever the JVM threw
                problems.append(f"{rule.key}={value}: Spark refuses it: {str(exc)[:120]}")
    assert problems == []


def test_codec_keys_take_class_names_in_spark_so_the_policy_takes_short_names_only(
        spark: SparkSession) -> None:
    known = known_configs(spark)
    codecs = [conf_rule(e) for e in DEFAULT_SPARK_CONF_ALLOW if e.endswith(f"={CODECS}")]
    assert len(codecs) == 3
    for rule in codecs:
        converted = known.get(rule.key).valueConverter().apply("org.evil.Codec")
        assert "org.evil.Codec" in str(converted)  # Spark would load it by name
        assert not rule.accepts("org.evil.Codec")
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    codec = jvm.java.lang.Class.forName("org.apache.spark.io.CompressionCodec$")
    names = codec.getField("MODULE$").get(None).shortCompressionCodecNames().keySet()
    assert sorted(str(names.mkString(",")).split(",")) == CODECS.split("|")  # Spark's own, all
