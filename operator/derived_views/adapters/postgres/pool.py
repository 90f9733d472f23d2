"""Connections to sink databases, kept between passes and bounded per database and role.

Without it every pass of every view opened a connection (TCP, TLS, SCRAM) and
closed it: with many views that is a connection storm on the team's database.
Connections are keyed by everything they were made with (a rotated password is
a new key; the old key's connections expire idle). At most `size` per key exist
at once; a pass that finds them all busy waits up to `wait_seconds`, then fails
as unreachable (it is retried). The operator's statements use only
transaction-scoped settings (SET LOCAL), but a connection also runs teams' cutover
checks: a returned connection is reset (`DISCARD ALL`: settings, role, prepared
statements, temporary tables, advisory locks, LISTENs, cursors) before it is kept,
so nothing one view's pass left in the session reaches the next user; one left in a
transaction, broken, or that cannot be reset is closed instead of kept. A kept
connection idle for more than `ping_after_seconds` is pinged before reuse, so a
database restart costs a reconnect, not a failed pass.  Idle connections older
than `idle_seconds` are closed, except the one a pass takes for its own key:
the pool shrinks to what is used without closing a connection to open another.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from derived_views.adapters.sink_contract import SinkUnavailable

DEFAULT_SIZE = 4
IDLE_SECONDS = 300.0
"""Idle connections older than this are closed (but the one a pass takes for its key)."""


@dataclass
class _Slot:
    idle: list[tuple[Any, float]] = field(default_factory=list)  # (connection, idle since)
    open: int = 0  # idle + in use


class PgPool:
    """Thread-safe: Kopf runs passes of different views at once."""

    def __init__(self, size: int = DEFAULT_SIZE, *, wait_seconds: float = 10.0,
                 idle_seconds: float = IDLE_SECONDS, ping_after_seconds: float = 2.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if size < 1:
            raise ValueError("pool size must be at least 1")
        self.size, self.wait_seconds, self.idle_seconds = size, wait_seconds, idle_seconds
        self.ping_after_seconds, self.clock = ping_after_seconds, clock
        self._slots: dict[Any, _Slot] = {}
        self._cond = threading.Condition()  # one for all keys: wake every waiter, not one
        self.connects = 0  # connections made, for tests and benchmarks

    def acquire(self, key: Any, connect: Callable[[], Any]) -> Any:
        """A live connection for `key`, reused or made with `connect`."""
        deadline = self.clock() + self.wait_seconds
        while True:
            reused = self._take(key, deadline)
            if reused is None:
                return self._connect(key, connect)
            conn, idle_since = reused
            if self.clock() - idle_since <= self.ping_after_seconds or _alive(conn):
                return conn
            self._discard(key, conn)

    def release(self, key: Any, conn: Any) -> None:
        """Keep `conn`, reset, for the next pass, unless it is broken, left mid-transaction
        (DISCARD ALL cannot run there) or the reset fails."""
        reusable = (not conn.closed and not conn.broken
                    and conn.info.transaction_status == TransactionStatus.IDLE
                    and _reset(conn))
        if not reusable:
            self._discard(key, conn)
            return
        with self._cond:
            self._slots[key].idle.append((conn, self.clock()))
            self._cond.notify_all()

    def open_connections(self) -> int:
        with self._cond:
            return sum(slot.open for slot in self._slots.values())

    def close_all(self) -> None:
        with self._cond:
            for slot in self._slots.values():
                for conn, _since in slot.idle:
                    conn.close()
                slot.open -= len(slot.idle)
                slot.idle.clear()

    def _take(self, key: Any, deadline: float) -> tuple[Any, float] | None:
        """An idle connection (with its idle-since time), or None after reserving a new one."""
        with self._cond:
            slot = self._slots.setdefault(key, _Slot())
            while True:
                # The most recently used idle connection is taken before the idle ones expire:
                # closing it to open a new one at once would only churn (a key used every few
                # minutes, as a settled view's, kept doing that); acquire pings it first.
                taken = slot.idle.pop() if slot.idle else None
                for each in self._slots.values():  # keys no pass asks for any more expire too
                    self._expire(each)
                if taken is not None:
                    return taken
                if slot.open < self.size:
                    slot.open += 1
                    return None
                left = deadline - self.clock()
                if left <= 0:
                    raise SinkUnavailable(
                        f"all {self.size} connections to this sink are busy (waited "
                        f"{self.wait_seconds:g}s); raise the operator's sink pool size "
                        "(DV_SINK_POOL_SIZE) if passes queue here")
                self._cond.wait(left)

    def _connect(self, key: Any, connect: Callable[[], Any]) -> Any:
        try:
            conn = connect()
        except BaseException:
            with self._cond:
                self._slots[key].open -= 1
                self._cond.notify_all()
            raise
        # psycopg's automatic prepared statements would outlive DISCARD ALL in its own cache
        # (it notices the reset only the first time): the pool's connections prepare none.
        conn.prepare_threshold = None
        with self._cond:
            self.connects += 1
        return conn

    def _discard(self, key: Any, conn: Any) -> None:
        try:
            conn.close()
        finally:
            with self._cond:
                self._slots[key].open -= 1
                self._cond.notify_all()

    def _expire(self, slot: _Slot) -> None:
        now = self.clock()
        keep = [(c, since) for c, since in slot.idle if now - since <= self.idle_seconds]
        for conn, since in slot.idle:
            if now - since > self.idle_seconds:
                conn.close()
        slot.open -= len(slot.idle) - len(keep)
        slot.idle[:] = keep


def _reset(conn: Any) -> bool:
    """Drop every piece of session state. An advisory lock a session kept would otherwise
    stall every job that takes it until the idle connection expires."""
    try:
        conn.execute("DISCARD ALL")
        return True
    except psycopg.Error:
        return False


def _alive(conn: Any) -> bool:
    try:
        conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False
