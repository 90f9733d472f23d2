"""The switch of the PostgreSQL sink's bulk merge, read before any query starts."""

from __future__ import annotations

import pytest

from dvjob.errors import ConfigError
from dvjob.sinks.registry import bulk_load_setting


@pytest.mark.parametrize(("value", "on"), [(None, True), ("", True), (" true ", True),
                                           ("TRUE", True), ("false", False), ("False", False)])
def test_the_bulk_merge_is_on_unless_turned_off(value: str | None, on: bool) -> None:
    assert bulk_load_setting(value) is on


@pytest.mark.parametrize("value", ["yes", "0", "off", "tru"])
def test_anything_but_true_or_false_is_refused_naming_the_setting(value: str) -> None:
    with pytest.raises(ConfigError, match=rf"spark.derivedviews.bulkLoad is '{value}': give "
                                          "true or false"):
        bulk_load_setting(value)
