"""The tenancy admission policy's CEL, rendered from the chart's values: the same shapes of
sparkConf values, host patterns and dead-letter placeholders as the operator's policy
(core/judges/tenancy.py). tests/integration/chart applies it to a real API server."""

from __future__ import annotations

import ipaddress
from typing import Any

from derived_views.core.judges.tenancy import SHAPES
from support.chart_render import Render, RenderError

CONF_RULE = "spark.sparkConf key ' + k + ' takes "


def validations(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    (vap,) = [o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"]
    found: list[dict[str, Any]] = vap["spec"]["validations"]
    return found


def rule_about(objs: list[dict[str, Any]], words: str) -> dict[str, Any]:
    (rule,) = [v for v in validations(objs) if words in v.get("messageExpression", "")]
    return rule


def test_the_chart_knows_the_operators_shapes_of_values(render: Render) -> None:
    allow = [f"spark.s.{shape}={shape}" for shape in SHAPES] + [
        "spark.codec=lz4|zstd.v2", "spark.platform.own"]
    shape = rule_about(render({"tenancy": {"sparkConf": {"allow": allow}}}), CONF_RULE)
    for name, (regex, told) in SHAPES.items():
        assert (f"(k == 'spark.s.{name}') && object.spec.spark.sparkConf[k].matches('^({regex})$')"
                in shape["expression"]), name
        assert f"(k == 'spark.s.{name}') ? '{told}'" in shape["messageExpression"], name
    # values joined by |, dots literal; a key alone takes any value (but `${`, a rule of its own)
    assert "matches('^(lz4|zstd[.]v2)$')" in shape["expression"]
    assert "? 'one of lz4, zstd.v2'" in shape["messageExpression"]
    assert "|| (k == 'spark.platform.own'))" in shape["expression"]
    substitution = rule_about(render(), "asks Spark to substitute")
    assert ".contains('${')" in substitution["expression"]


def test_the_default_sparkconf_rules_have_no_prefix_and_no_any(render: Render) -> None:
    objs = render()
    keys = rule_about(objs, "tenancy.sparkConf.allow); remove it")["expression"]
    allowed = keys.split(" && !(")[0]
    assert "startsWith" not in allowed  # explicit keys only
    assert "k.startsWith('spark.sql.variable.substitute')" in keys  # denied
    shape = rule_about(objs, CONF_RULE)["expression"]
    assert "matches('^(lz4|lzf|snappy|zstd)$')" in shape


def test_host_patterns_render_addresses_as_numbers_and_names_as_names(render: Render) -> None:
    patterns = ["10.0.0.*:9092", "10.1.0.0/24", "10.2.0.9/20", "10.3.0.7",
                "*.kafka.platform.svc:9093", "Kafka.Shop:*", "[fd00::/64]:9092", "[::1]", "*"]
    objs = render({"tenancy": {"kafka": {"clusters": [{"bootstrapServers": patterns}]}}})
    rule = rule_about(objs, "tenancy.kafka.clusters")["expression"]
    for cidr, port in (("10.0.0.0/24", " && int(p) == 9092"), ("10.1.0.0/24", ""),
                       ("10.2.0.0/20", "")):
        net = ipaddress.ip_network(cidr)
        low, high = int(net.network_address), int(net.broadcast_address)
        assert f".all(n, n >= {low} && n <= {high})){port})" in rule, cidr
    assert "(h == '10.3.0.7')" in rule
    assert ("h.lowerAscii().endsWith('.kafka.platform.svc')) && int(p) == 9093)" in rule)
    assert "(h.lowerAscii() == 'kafka.shop')" in rule  # names compare in lower case
    assert "cidr('fd00::/64').containsIP(h.substring(1, h.size() - 1))) && int(p) == 9092)" in rule
    assert "cidr('::1/128')" in rule
    assert "(h.matches('^((25[0-5]" in rule  # `*`: an IPv4 address, a name or an IPv6 one


def test_a_host_pattern_of_neither_form_fails_the_release(render_error: RenderError) -> None:
    for bad in ("kafka*", "10.0.0.1*", "fd00::1", "kafka.*.svc", "10.0.0.300/24", "10.0.0.0/40",
                "kafka:90*", "[fd00::/129]", "[10.0.0.1]"):
        message = render_error({"tenancy": {"kafka": {"clusters": [{"bootstrapServers": [bad]}]}}})
        assert "bootstrapServers" in message or "host pattern" in message, (bad, message)
    message = render_error({"tenancy": {"schemaRegistries": ["registry*"]}})
    assert "schemaRegistries" in message


def test_dead_letter_patterns_expand_the_view_namespace(render: Render,
                                                        render_error: RenderError) -> None:
    topics = ["dlq.{namespace}.*", "shared-dead", "{namespace}-dead"]
    rule = rule_about(render({"tenancy": {"kafka": {"deadLetterTopics": topics}}}),
                      "tenancy.kafka.deadLetterTopics")
    assert ("deadLetterTopic.startsWith('dlq.' + request.namespace + '.') || "
            "object.spec.source.badRecords.deadLetterTopic == 'shared-dead' || "
            "object.spec.source.badRecords.deadLetterTopic == '' + request.namespace + '-dead')"
            in rule["expression"])
    assert ("name a topic matching dlq.' + request.namespace + '.*, shared-dead, ' + "
            "request.namespace + '-dead, or ask" in " ".join(rule["messageExpression"].split()))
    message = render_error({"tenancy": {"kafka": {"deadLetterTopics": ["dlq.{team}.*"]}}})
    assert "deadLetterTopics" in message
