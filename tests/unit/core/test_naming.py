"""Index, alias, SparkApplication and checkpoint names, with the limits they must respect."""

from __future__ import annotations

import re

import pytest

from derived_views.core import naming

DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def test_an_index_is_named_after_its_alias_and_revision() -> None:
    assert naming.index_table("orders_by_customer", "71250ff800") == \
        "orders_by_customer__71250ff800"


def test_the_longest_alias_still_fits_postgres() -> None:
    base = "t" * 40  # the CRD's maximum
    assert len(naming.index_table(base, "0123456789")) == 52


def test_an_index_name_over_63_bytes_is_refused_not_truncated() -> None:
    with pytest.raises(ValueError, match="63-byte"):
        naming.index_table("t" * 60, "0123456789")


@pytest.mark.parametrize(("table", "revision"), [
    ("orders__71250ff800", "71250ff800"),
    ("orders__71250FF800", None),
    ("orders__71250ff80", None),
    ("orders_71250ff800", None),
    ("orders__x__71250ff800", None),
    ("other__71250ff800", None),
])
def test_index_revision_parses_only_this_bases_indexes(table: str, revision: str | None) -> None:
    assert naming.index_revision("orders", table) == revision


@pytest.mark.parametrize(("view", "expected"), [
    ("orders-by-customer", "orders-by-customer-71250ff800"),
    ("a" * 52, "a" * 52 + "-71250ff800"),  # exactly 63
])
def test_spark_application_names_that_fit_are_kept(view: str, expected: str) -> None:
    assert naming.spark_application_name(view, "71250ff800") == expected


@pytest.mark.parametrize("view", ["a" * 53, "x" * 63, "shop.orders.v2", "1st-view",
                                  "a" * 40 + ".b", "-".join(["ab"] * 30)])
def test_other_names_become_unique_dns_labels(view: str) -> None:
    name = naming.spark_application_name(view, "71250ff800")
    assert len(name) <= 63 and DNS_LABEL.match(name), name
    assert name.endswith("-71250ff800")


def test_shortened_names_of_different_views_differ() -> None:
    a = naming.spark_application_name("v" * 60 + "a", "71250ff800")
    b = naming.spark_application_name("v" * 60 + "b", "71250ff800")
    dotted = naming.spark_application_name("shop.orders", "71250ff800")
    dashed = naming.spark_application_name("shop-orders", "71250ff800")
    assert a != b and dotted != dashed


def test_checkpoint_locations() -> None:
    assert naming.checkpoint_location("s3a://bucket/dv/", "shop", "orders", "71250ff800") == \
        "s3a://bucket/dv/shop/orders/71250ff800"
    assert naming.checkpoint_location("/var/dv", "shop", "orders", "71250ff800", build=2) == \
        "/var/dv/shop/orders/71250ff800.2"
    with pytest.raises(ValueError):
        naming.checkpoint_location("/var/dv", "shop", "orders", "71250ff800", build=-1)
