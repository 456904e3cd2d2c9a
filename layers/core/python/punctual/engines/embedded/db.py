"""Connections to the embedded engine's SQLite file: one per thread, shared by nothing else.

Concurrency model:

- Threads: each thread gets its own connection (``threading.local``); SQLite serializes writers
  across connections, so no Python lock is held around I/O.
- Processes: any number of processes on one machine may open the same file. Every write
  transaction waits for its turn (:mod:`.writers`: a lock file beside the database) and starts
  with ``BEGIN IMMEDIATE``, which takes the write lock up front. A deferred transaction that
  reads first and writes later could instead fail with ``SQLITE_BUSY`` when another process
  committed in between (WAL cannot upgrade a stale read snapshot), and the busy handler cannot
  retry that case. Reads run in autocommit
  mode: each statement sees one consistent snapshot.
- ``fork``: a child never uses a connection inherited from its parent (SQLite forbids it); the
  process id is checked and the child opens its own.
- Checkpoints run on a thread of their own (:mod:`.checkpoint`), started by the first write.
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from punctual.engines.embedded import pid, schema, writers
from punctual.engines.embedded.checkpoint import Checkpointer

BUSY_TIMEOUT_MS = 10_000  # how long a writer waits for another writer before SQLITE_BUSY


class Database:
    """The SQLite file, opened in WAL mode and migrated on construction.

    Raises :class:`punctual.errors.ConfigError` if the file cannot be used (see :func:`schema.migrate`).
    """

    def __init__(self, path: str | Path, *, shards: int, synchronous: str = "NORMAL") -> None:
        self.path = Path(path)
        self._synchronous = synchronous.upper()
        self._local = threading.local()
        self._lock = threading.Lock()  # guards _connections (open/close bookkeeping only)
        self._lock_key = os.path.realpath(self.path)
        self._connections: weakref.WeakSet[_Held] = weakref.WeakSet()
        self._closed = False
        self._checkpointer = Checkpointer(self.path)
        conn = self.connection()
        schema.enable_wal(conn)
        schema.migrate(conn, shards=shards)

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use). Raises RuntimeError after :meth:`close`."""
        if self._closed:
            raise RuntimeError(f"database {self.path} is closed")
        held: _Held | None = getattr(self._local, "held", None)
        if held is not None and held.pid == pid.current():
            return held.conn
        held = _Held(self._open())
        with self._lock:
            self._connections.add(held)
        # Only the thread-local refers to it: when the thread ends, the connection is closed.
        self._local.held = held
        return held.conn

    def open_connections(self) -> int:
        """How many connections this object has open in this process (one per live thread that used it)."""
        with self._lock:
            return sum(1 for held in self._connections if held.pid == pid.current() and not held.closed)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``): committed on exit, rolled back on error.

        Committed means durable against a crash of this or any other process (see
        :func:`schema.configure`). Transactions do not nest.
        """
        conn = self.connection()
        if conn.in_transaction:
            raise RuntimeError("write transactions do not nest")
        self._checkpointer.ensure_started()
        # Writers queue for their turn (threads on a lock, processes on a lock file: .writers), so
        # that BEGIN IMMEDIATE finds SQLite's lock free instead of polling it.
        with writers.turn(self._lock_key):
            _begin_immediate(conn)
            try:
                yield conn
                conn.execute("COMMIT")
                self._checkpointer.wrote()
            except BaseException:
                if conn.in_transaction:  # the body failed, or COMMIT did (then nothing was committed)
                    conn.execute("ROLLBACK")
                raise

    def checkpoint(self) -> bool:
        """``wal_checkpoint(TRUNCATE)`` on this thread's connection: copy the WAL back into the
        file, sync it and empty the WAL. Waits for writers and for readers of older pages
        (``busy_timeout``), and retries while another connection checkpoints (SQLite answers
        that at once, without waiting), up to ``BUSY_TIMEOUT_MS``. Returns whether it completed."""
        conn = self.connection()
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            if not busy or time.monotonic() >= deadline:
                return not busy
            time.sleep(0.005)

    def close(self) -> None:
        """Close every connection this object opened in this process. Idempotent."""
        self._checkpointer.stop()
        with self._lock:
            self._closed = True
            connections, self._connections = list(self._connections), weakref.WeakSet()
        for held in connections:
            held.close()

    def _open(self) -> sqlite3.Connection:
        # isolation_level=None: the sqlite3 module issues no implicit BEGIN; transactions are
        # exactly the ones write() opens. check_same_thread=False only so close() may run from
        # any thread; a connection is otherwise used by its own thread alone.
        conn = sqlite3.connect(
            self.path,
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,
            check_same_thread=False,
            cached_statements=256,
        )
        schema.configure(conn, synchronous=self._synchronous, busy_timeout_ms=BUSY_TIMEOUT_MS)
        return conn


class _Held:
    """A thread's connection, closed when the thread ends (its thread-local goes away) or on close().

    Threads come and go (a web server's pool retires idle threads): without this, every thread
    that ever used the database would leave a connection (a file descriptor, a page cache) open.
    """

    __slots__ = ("__weakref__", "closed", "conn", "pid")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn, self.pid, self.closed = conn, pid.current(), False

    def close(self) -> None:
        if not self.closed and self.pid == pid.current():  # a forked child must not close its parent's
            self.closed = True
            self.conn.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown: nothing left to do
            self.close()


def _begin_immediate(conn: sqlite3.Connection) -> None:
    """Take the database's write lock, retrying every ~0.1-1 ms for up to ``BUSY_TIMEOUT_MS`` (a
    writer that does not queue in :mod:`.writers` holds it: SQLite's shell, a TRUNCATE checkpoint)."""
    conn.execute("PRAGMA busy_timeout = 0")  # we retry ourselves, in short steps
    try:
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                    raise
            time.sleep(random.uniform(0.0001, 0.001))  # jittered: processes do not retry in lockstep
    finally:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")  # every other statement waits as before
