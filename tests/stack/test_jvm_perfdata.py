"""dvstack.testing.jvm_perfdata: HotSpot's perfdata layout, read without attaching."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from dvstack.testing.jvm_perfdata import (
    PerfDataError,
    jvm_memory,
    perfdata_path,
    read_longs,
)

MB = 1024 * 1024


def perfdata(entries: list[tuple[str, str, int | bytes]], order: str = "<") -> bytes:
    """A perfdata file laid out as perfMemory.hpp says: the 32-byte prologue, then entries of
    a 20-byte header, a NUL-terminated name padded to 8 bytes, and the data."""
    body = b""
    for name, kind, value in entries:
        raw_name = name.encode() + b"\0"
        raw_name += b"\0" * (-len(raw_name) % 8)
        data = struct.pack(order + "q", value) if kind == "J" else bytes(value)  # type: ignore[arg-type]
        vector = 0 if kind == "J" else len(data)
        header_size = 20
        name_at = header_size
        data_at = name_at + len(raw_name)
        length = data_at + len(data) + (-(data_at + len(data)) % 8)
        entry = struct.pack(order + "iiibbbbi", length, name_at, vector, ord(kind), 0, 1, 1,
                            data_at) + raw_name + data
        body += entry + b"\0" * (length - len(entry))
    prologue = b"\xca\xfe\xc0\xc0" + struct.pack(
        order + "bbbbiiqii", 1 if order == "<" else 0, 2, 0, 1, 32 + len(body), 0, 0, 32,
        len(entries))
    return prologue + body


SERIAL = [("java.threads.live", "J", 42),
          ("sun.rt.javaCommand", "B", b"org.apache.spark.deploy.SparkSubmit\0"),
          ("sun.gc.generation.0.capacity", "J", 16 * MB),
          ("sun.gc.generation.0.space.0.used", "J", 3 * MB),
          ("sun.gc.generation.0.space.1.used", "J", MB),
          ("sun.gc.generation.0.space.2.used", "J", 0),
          ("sun.gc.generation.1.capacity", "J", 144 * MB),
          ("sun.gc.generation.1.space.0.used", "J", 100 * MB),
          ("sun.gc.metaspace.capacity", "J", 150 * MB),
          ("sun.gc.compressedclassspace.capacity", "J", 20 * MB)]


@pytest.mark.parametrize("order", ["<", ">"])
def test_the_longs_are_read_in_the_files_byte_order_and_strings_skipped(order: str) -> None:
    counters = read_longs(perfdata(SERIAL, order))
    assert counters["java.threads.live"] == 42
    assert counters["sun.gc.generation.1.capacity"] == 144 * MB
    assert "sun.rt.javaCommand" not in counters


def test_the_profile_is_both_generations_and_metaspace_which_holds_the_class_space() -> None:
    memory = jvm_memory(read_longs(perfdata(SERIAL)))
    assert (memory.heap_committed, memory.heap_used) == (160.0, 104.0)
    assert memory.metaspace_committed == 150.0  # jstat's MC: the class space is within it
    assert memory.threads == 42


def test_a_file_that_is_not_perfdata_is_refused() -> None:
    with pytest.raises(PerfDataError, match="magic"):
        read_longs(b"\0" * 64)
    with pytest.raises(PerfDataError, match="past the end"):
        read_longs(perfdata(SERIAL)[:-8])  # the last value cut short (4 bytes of padding)
    with pytest.raises(PerfDataError, match="version 1"):
        read_longs(perfdata(SERIAL)[:5] + b"\x01" + perfdata(SERIAL)[6:])


def test_a_containers_jvm_is_found_under_its_own_pid(tmp_path: Path) -> None:
    (tmp_path / "77").mkdir()
    (tmp_path / "77" / "status").write_text("Name:\tjava\nNSpid:\t77\t12\n")
    files = tmp_path / "77" / "root" / "tmp" / "hsperfdata_spark"
    files.mkdir(parents=True)
    (files / "12").write_bytes(perfdata(SERIAL))
    assert perfdata_path(77, tmp_path) == files / "12"
    assert perfdata_path(78, tmp_path) is None
