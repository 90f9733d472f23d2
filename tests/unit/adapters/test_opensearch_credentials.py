"""The OpenSearch sink Secret's keys: what is refused, and that no value leaks into a message."""

from __future__ import annotations

import pytest

from derived_views.adapters.opensearch.client import OpenSearchCredentials


def test_url_and_an_optional_user() -> None:
    plain = OpenSearchCredentials.from_secret_data({"url": "http://search:9200/"})
    assert (plain.url, plain.username, plain.password) == ("http://search:9200", None, None)
    basic = OpenSearchCredentials.from_secret_data(
        {"url": "https://search:9200", "username": "dv", "password": "s3cret"})
    assert (basic.username, basic.password) == ("dv", "s3cret")
    assert "s3cret" not in repr(basic)


@pytest.mark.parametrize(("data", "message"), [
    ({}, "key url is missing"),
    ({"url": "search:9200"}, "http:// or https://"),
    ({"url": "ftp://search"}, "http:// or https://"),
    ({"url": "https://dv:s3cret@search:9200"}, "must not carry credentials"),
    ({"url": "https://search:9200", "username": "dv"}, "set both or neither"),
    ({"url": "https://search:9200", "password": "s3cret"}, "set both or neither"),
])
def test_unusable_data_is_named(data: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message) as refused:
        OpenSearchCredentials.from_secret_data(data)
    assert "s3cret" not in str(refused.value)
