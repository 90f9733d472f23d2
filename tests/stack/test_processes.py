"""dvstack.processes: the /proc meter the benchmarks read."""

from __future__ import annotations

import os
from pathlib import Path

from dvstack import processes

# proc(5): pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
# utime stime cutime cstime priority nice threads itrealvalue starttime vsize rss ...
LINE = ("4242 (java (x) y) S 1 4242 4240 0 -1 4194560 10 0 0 0 "
        "{utime} {stime} {cutime} {cstime} 20 0 12 0 100 1000000 {rss} 0")


def test_a_command_with_spaces_and_parentheses_does_not_shift_the_fields() -> None:
    tick = os.sysconf("SC_CLK_TCK")
    page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
    text = LINE.format(utime=3 * tick, stime=tick, cutime=2 * tick, cstime=0, rss=2048)
    stat = processes.parse_stat(4242, text)
    assert (stat.pid, stat.command, stat.session) == (4242, "java (x) y", 4240)
    assert (stat.cpu_seconds, stat.children_seconds) == (4.0, 2.0)
    assert stat.rss_mb == 2048 * page_kb / 1024


def test_this_process_is_read_from_proc() -> None:
    stat = processes.proc_stat(os.getpid())
    assert stat.pid == os.getpid() and stat.session == os.getsid(0)
    assert stat.command == Path(f"/proc/{os.getpid()}/comm").read_text().strip()
    assert stat.cpu_seconds > 0 and stat.rss_mb > 1
