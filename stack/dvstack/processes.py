"""Start and stop the stack's daemons as detached process groups.

Each daemon gets a pid file in the run directory and a log file in the logs
directory; `stop` signals the whole process group so nothing is orphaned.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dvstack.settings import Settings

_CLOCK = os.sysconf("SC_CLK_TCK")
_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def pid_file(settings: Settings, name: str) -> Path:
    return settings.run_dir / f"{name}.pid"


def log_file(settings: Settings, name: str) -> Path:
    return settings.logs_dir / f"{name}.log"


def read_pid(settings: Settings, name: str) -> int | None:
    try:
        return int(pid_file(settings, name).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours still answers kill(0); reap it if it is one.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        done = 0
    if done == pid:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def running(settings: Settings, name: str) -> int | None:
    pid = read_pid(settings, name)
    return pid if pid is not None and alive(pid) else None


def start(
    settings: Settings,
    name: str,
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    user: str | None = None,
) -> int:
    """Start `argv` in its own session, stdout+stderr appended to its log."""
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    full_argv = list(argv)
    if user is not None:
        full_argv = ["runuser", "-u", user, "--", *full_argv]
    with open(log_file(settings, name), "ab") as log:
        proc = subprocess.Popen(
            full_argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
    pid_file(settings, name).write_text(f"{proc.pid}\n")
    return proc.pid


def stop(settings: Settings, name: str, *, timeout: float = 30.0) -> bool:
    """SIGTERM the daemon's process group, SIGKILL it past `timeout`."""
    pid = read_pid(settings, name)
    if pid is None:
        return False
    was_alive = alive(pid)
    if was_alive:
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if alive(pid):
            _signal_group(pid, signal.SIGKILL)
    # Children that outlived their leader still share its group id.
    _signal_group(pid, signal.SIGKILL)
    pid_file(settings, name).unlink(missing_ok=True)
    return was_alive


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def tail(path: Path, lines: int = 30) -> str:
    try:
        content = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return f"(no log at {path})"
    return "\n".join([f"--- last lines of {path.name} ---", *content[-lines:]])


def run(argv: Sequence[str], *, what: str, env: Mapping[str, str] | None = None,
        cwd: Path | None = None, user: str | None = None) -> str:
    """Run a setup command to completion; raise with its output if it fails."""
    full_argv = list(argv)
    if user is not None:
        full_argv = ["runuser", "-u", user, "--", *full_argv]
    proc = subprocess.run(
        full_argv, capture_output=True, text=True, cwd=cwd, env={**os.environ, **(env or {})},
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def free_port() -> int:
    """A TCP port free on the loopback now, for a local process that needs its own."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def write_properties(path: Path, props: Mapping[str, str]) -> bool:
    """Write a Java properties file, one `key=value` line each; True when its text changed
    (a running daemon then still has the old one). Java reads a backslash as an escape, so
    values hold forward slashes only."""
    text = "".join(f"{k}={v}\n" for k, v in props.items())
    changed = not path.is_file() or path.read_text() != text
    if changed:
        path.write_text(text)
    return changed


@dataclass(frozen=True)
class ProcStat:
    """One process's CPU and memory as /proc/<pid>/stat gives them (the benchmarks' meter)."""

    pid: int
    command: str
    """The executable's name (proc(5)'s `comm`, at most 15 characters)."""
    session: int
    cpu_seconds: float
    """utime + stime of the process itself."""
    children_seconds: float
    """cutime + cstime: what its reaped children used (Python workers that came and went)."""
    rss_mb: float


def parse_stat(pid: int, text: str) -> ProcStat:
    """/proc/<pid>/stat, whose second field (the command) may hold spaces and parentheses."""
    command, rest = text.split("(", 1)[1].rsplit(")", 1)
    fields = rest.split()
    # fields[0] is the state (field 3 of proc(5)); session is field 6, utime 14, stime 15,
    # cutime 16, cstime 17, rss 24 (pages)
    return ProcStat(pid=pid, command=command, session=int(fields[3]),
                    cpu_seconds=(int(fields[11]) + int(fields[12])) / _CLOCK,
                    children_seconds=(int(fields[13]) + int(fields[14])) / _CLOCK,
                    rss_mb=int(fields[21]) * _PAGE_KB / 1024)


def proc_stat(pid: int) -> ProcStat:
    """parse_stat of a running process (OSError when it is gone)."""
    return parse_stat(pid, Path(f"/proc/{pid}/stat").read_text())
