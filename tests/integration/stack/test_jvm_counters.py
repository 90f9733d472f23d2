"""A real JVM's counters read from its perfdata file: the stack's Kafka broker."""

from __future__ import annotations

from dvstack import processes
from dvstack.settings import load
from dvstack.testing.jvm_perfdata import jvm_memory, perfdata_path, read_longs


def test_the_brokers_heap_lies_between_the_sizes_it_was_started_with() -> None:
    pid = processes.read_pid(load(), "kafka")
    assert pid is not None, "the stack's Kafka broker is not running"
    path = perfdata_path(pid)
    assert path is not None, f"no hsperfdata file for the broker (pid {pid})"
    memory = jvm_memory(read_longs(path.read_bytes()))
    # kafka_broker starts it with -Xms128m -Xmx512m
    assert 128 <= memory.heap_committed <= 512
    assert 0 < memory.heap_used <= memory.heap_committed
    assert memory.metaspace_committed > 10 and memory.threads > 10
