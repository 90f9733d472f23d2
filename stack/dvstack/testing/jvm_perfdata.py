"""Where a JVM's memory goes, read from its hsperfdata file without attaching to it.

HotSpot publishes its counters (heap generations, metaspace, live threads) in a memory-mapped
file, `/tmp/hsperfdata_<user>/<pid>`, which `jstat` reads. Reading that file instead of
asking the JVM (jcmd) costs the measured process nothing: no attach thread, no safepoint.
A container's JVM keeps it in its own /tmp under its own pid, reached from the host as
`/proc/<host pid>/root/tmp/hsperfdata_*/<pid in the container>`.

The layout is HotSpot's PerfData memory (perfMemory.hpp, version 2): a 32-byte prologue
(magic 0xcafec0c0 in big-endian byte order, the byte order of the rest, the version, the
offset and count of the entries), then entries of a 20-byte header (length, name offset,
vector length, type, flags, units, variability, data offset) followed by a NUL-terminated
name and the data. Longs (type 'J') are what a memory profile needs.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PERFDATA_MAGIC = b"\xca\xfe\xc0\xc0"
PROLOGUE = struct.Struct("4sbbbbiiqii")
ENTRY = "iiibbbbi"
LONG = ord("J")
MB = 1024 * 1024


class PerfDataError(ValueError):
    """Not a HotSpot perfdata file this reader understands."""


def read_longs(data: bytes) -> dict[str, int]:
    """Every scalar long counter of a perfdata file, by name."""
    if len(data) < PROLOGUE.size or data[:4] != PERFDATA_MAGIC:
        raise PerfDataError("no hsperfdata magic at the start")
    order = "<" if data[4] == 1 else ">"
    _, _, major, _, _, _, _, _, offset, count = struct.unpack_from(order + PROLOGUE.format,
                                                                   data)
    if major != 2:
        raise PerfDataError(f"hsperfdata version {major}, this reader knows 2")
    entry = struct.Struct(order + ENTRY)
    found: dict[str, int] = {}
    for _ in range(count):
        if offset + entry.size > len(data):
            raise PerfDataError("an entry runs past the end of the file")
        length, name_at, vector, kind, _, _, _, data_at = entry.unpack_from(data, offset)
        if length <= 0:
            raise PerfDataError("an entry of no length")
        name_end = data.find(b"\0", offset + name_at)
        if name_end < 0 or (kind == LONG and offset + data_at + 8 > len(data)):
            raise PerfDataError("an entry's name or value runs past the end of the file")
        name = data[offset + name_at:name_end].decode("ascii", errors="replace")
        if kind == LONG and vector == 0:
            (found[name],) = struct.unpack_from(order + "q", data, offset + data_at)
        offset += length
    return found


@dataclass(frozen=True)
class JvmMemory:
    """A JVM's committed memory by part, in MB, and its live threads."""

    heap_committed: float
    heap_used: float
    metaspace_committed: float
    """Class metadata (the compressed class space is a part of it)."""
    threads: int


def jvm_memory(counters: Mapping[str, int]) -> JvmMemory:
    """The profile from the counters: generations 0 (young) and 1 (old) of any collector."""
    def total(prefix: str, suffix: str) -> int:
        return sum(v for k, v in counters.items() if k.startswith(prefix) and k.endswith(suffix))

    generations = [f"sun.gc.generation.{g}." for g in (0, 1)]
    committed = sum(counters.get(g + "capacity", 0) for g in generations)
    used = sum(total(g + "space.", ".used") for g in generations)
    metaspace = counters.get("sun.gc.metaspace.capacity", 0)
    return JvmMemory(heap_committed=round(committed / MB, 1), heap_used=round(used / MB, 1),
                     metaspace_committed=round(metaspace / MB, 1),
                     threads=counters.get("java.threads.live", 0))


def perfdata_path(pid: int, proc: Path = Path("/proc")) -> Path | None:
    """The hsperfdata file of a (possibly containerised) JVM, or None when it has none."""
    try:
        status = (proc / str(pid) / "status").read_text()
    except OSError:
        return None
    inner = next((line.split()[-1] for line in status.splitlines()
                  if line.startswith("NSpid:")), str(pid))
    matches = sorted((proc / str(pid) / "root" / "tmp").glob(f"hsperfdata_*/{inner}"))
    return matches[0] if matches else None
