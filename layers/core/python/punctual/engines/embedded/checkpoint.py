"""Checkpoints off the writers' path: a thread per process copies the WAL back into the file.

In WAL mode a commit appends the pages it changed to the WAL; a *checkpoint* copies the newest
version of every page in the WAL back into the database file and syncs it. SQLite runs it inline,
in whichever commit crosses ``wal_autocheckpoint`` pages, so that commit pays for every page the
transactions before it changed. On a large file that is a large part of a claim's cost: an
advance at 10M jobs changes a page no other advance shares, so every claim adds a page to copy
(docs/decisions.md, issue 14). So a daemon thread checkpoints instead, every ``interval_s``, on
its own connection, in ``PASSIVE`` mode: it never waits for and never blocks a reader or a
writer, and it copies only committed pages (durability is the WAL's, unchanged). Writers keep an
automatic checkpoint at a higher bound (:data:`punctual.engines.embedded.schema.WAL_FALLBACK_PAGES`)
for when this thread falls behind.

It never opens SQLite's own files (``-wal``, ``-shm``) itself. An earlier version read the
WAL-index header from the ``-shm`` file to checkpoint only once enough frames waited; closing that
file handle dropped every POSIX lock the process held on it (fcntl locks belong to the process,
not the handle), so other processes saw no reader and reset the WAL under this one: "database
disk image is malformed" within one 20,000-run burst (https://www.sqlite.org/howtocorrupt.html,
section 2.2; tests/unit/test_embedded_claim_at_scale.py).

Started on a process's first write (a process that only reads never starts one), stopped by
:meth:`Checkpointer.stop` (``Database.close``). A forked child starts its own on its first write.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from pathlib import Path

logger = logging.getLogger("punctual.embedded")

# Once a second: at the claim rate of a 10M-job file (~10,000 advances/s, each a page of its own)
# a pass copies some 10,000-30,000 pages (fewer, larger checkpoints copy a page rewritten often
# once), below the writers' own bound; an idle WAL costs a pass nothing.
CHECKPOINT_INTERVAL_S = 1.0


class Checkpointer:
    """A background ``PRAGMA wal_checkpoint(PASSIVE)`` every ``interval_s`` for one database file."""

    def __init__(self, path: Path, *, interval_s: float = CHECKPOINT_INTERVAL_S) -> None:
        self._path = path
        self._interval_s = interval_s
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._pid = 0
        self.checkpoints = 0  # passes that copied frames back (tests and diagnostics)

    def ensure_started(self) -> None:
        """Start the thread in this process unless it runs already (cheap when it does)."""
        if self._pid == os.getpid() and self._thread is not None:
            return
        with self._lock:
            if self._pid == os.getpid() and self._thread is not None:
                return
            self._pid, self._stop = os.getpid(), threading.Event()
            self._thread = threading.Thread(
                target=self._run, args=(self._stop,), name=f"punctual-checkpoint-{self._path.name}", daemon=True
            )
            self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop this process's thread. Idempotent."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is None or self._pid != os.getpid():
                return
            self._stop.set()
        thread.join(timeout_s)

    def _run(self, stop: threading.Event) -> None:
        try:
            conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            logger.warning("no background checkpoints for %s: %s", self._path, exc)
            return
        try:
            conn.execute("PRAGMA busy_timeout = 0")  # PASSIVE: a busy checkpoint lock means another does it
            conn.execute("PRAGMA cache_size = -1024")  # a checkpoint copies pages through no page cache
            while not stop.wait(self._interval_s):
                self._checkpoint(conn)
        finally:
            conn.close()

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        try:
            busy, _log, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:  # e.g. the file was removed under us: the writers' fallback remains
            logger.debug("background checkpoint of %s failed: %s", self._path, exc)
            return
        if not busy and copied > 0:
            self.checkpoints += 1
