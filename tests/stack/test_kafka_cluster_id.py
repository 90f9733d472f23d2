"""The local stack's KRaft cluster id never looks like a command-line option."""

from __future__ import annotations

from dvstack.services.kafka_broker import new_cluster_id


def test_an_id_starting_with_a_dash_is_drawn_again() -> None:
    # 0xf8 = 0b111110.. -> the first base64 digit is 62, '-' in the URL-safe alphabet.
    draws = iter([bytes([0xF8]) + bytes(15), bytes(16)])
    assert new_cluster_id(lambda: next(draws)) == "AAAAAAAAAAAAAAAAAAAAAA"


def test_an_id_is_22_url_safe_characters() -> None:
    cluster_id = new_cluster_id()
    assert len(cluster_id) == 22
    assert set(cluster_id) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert not cluster_id.startswith("-")
