"""Checkpoints off the writers' path: a thread per process copies the WAL back into the file.

In WAL mode a commit appends the pages it changed to the WAL; a *checkpoint* copies the newest
version of every page in the WAL back into the database file and syncs it. SQLite runs it inline,
in whichever commit crosses ``wal_autocheckpoint`` pages, so that commit pays for every page the
transactions before it changed. On a large file that is a large part of a claim's cost: an
advance at 10M jobs changes a page no other advance shares, so every claim adds a page to copy
(docs/decisions.md, issue 14). So a daemon thread runs the same policy instead — a checkpoint once
:data:`CHECKPOINT_PAGES` frames wait in the WAL — on its own connection, in ``PASSIVE`` mode: it
never waits for and never blocks a reader or a writer, and it copies only committed pages
(durability is the WAL's, unchanged). It learns how many frames wait from the WAL-index header
in the ``-shm`` file (``mxFrame`` and ``nBackfill``, https://www.sqlite.org/walformat.html),
polled every ``interval_s``. Writers keep an automatic checkpoint at a higher bound
(:data:`punctual.engines.embedded.schema.WAL_FALLBACK_PAGES`) for when this thread falls behind.

Started on a process's first write (a process that only reads never starts one), stopped by
:meth:`Checkpointer.stop` (``Database.close``). A forked child starts its own on its first write.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import struct
import threading
from pathlib import Path

logger = logging.getLogger("punctual.embedded")

CHECKPOINT_INTERVAL_S = 0.1  # how often the WAL-index header is read (a 100-byte read)
CHECKPOINT_PAGES = 10_000  # ~40 MB of WAL: fewer, larger checkpoints copy a page rewritten often once
# WAL-index header (native byte order): mxFrame, the last valid frame, at byte 16; the checkpoint
# info's nBackfill, the frames already copied back, at byte 96
_MX_FRAME, _N_BACKFILL = 16, 96


class Checkpointer:
    """A background ``PRAGMA wal_checkpoint(PASSIVE)`` every ``interval_s`` for one database file."""

    def __init__(self, path: Path, *, interval_s: float = CHECKPOINT_INTERVAL_S, pages: int = CHECKPOINT_PAGES) -> None:
        self._path = path
        self._shm = Path(f"{path}-shm")
        self._interval_s = interval_s
        self._pages = pages
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._pid = 0
        self.checkpoints = 0  # completed passes (tests and diagnostics)

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
                waiting = frames_waiting(self._shm)
                if waiting is not None and waiting >= self._pages:
                    self._checkpoint(conn)
        finally:
            conn.close()

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.checkpoints += 1
        except sqlite3.Error as exc:  # e.g. the file was removed under us: the writers' fallback remains
            logger.debug("background checkpoint of %s failed: %s", self._path, exc)


def frames_waiting(shm: Path) -> int | None:
    """WAL frames not yet copied back into the file, from the WAL-index header; None if unreadable."""
    try:
        with shm.open("rb") as f:
            header = f.read(_N_BACKFILL + 4)
    except OSError:
        return None
    if len(header) < _N_BACKFILL + 4:
        return None
    mx_frame: int = struct.unpack_from("=I", header, _MX_FRAME)[0]
    backfilled: int = struct.unpack_from("=I", header, _N_BACKFILL)[0]
    return max(0, mx_frame - backfilled)
