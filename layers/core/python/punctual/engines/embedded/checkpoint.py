"""Checkpoints off the writers' path: a thread per process copies the WAL back into the file.

In WAL mode a commit appends the pages it changed to the WAL; a *checkpoint* copies the newest
version of every page in the WAL back into the database file and syncs it. SQLite runs it inline,
in whichever commit crosses ``wal_autocheckpoint`` pages, so that commit pays for every page the
transactions before it changed. On a large file that is a large part of a claim's cost: an
advance at 10M jobs changes a page no other advance shares, so every claim adds a page to copy
(docs/decisions/0098, 0099, 0106). So a daemon thread checkpoints instead, on its own connection, in
``PASSIVE`` mode: it never waits for and never blocks a reader or a writer, and it copies only
committed pages (durability is the WAL's, unchanged). Writers keep an automatic checkpoint at a
higher bound (:data:`punctual.engines.embedded.schema.WAL_FALLBACK_PAGES`) for when this thread
falls behind.

When: once this process's writes pause (:data:`QUIET_S` without a commit), or once the oldest
commit not yet copied is :data:`MAX_WAIT_S` old, whichever comes first. A scheduler writes in
bursts (a claim at the top of the minute): the copy then runs in the pause after the burst
instead of taking CPU from it, and a stream of writes that never pauses is still copied at least
every ``MAX_WAIT_S``. The copy costs the same either way; only its moment moves. Commits of other
processes are not seen here (their own threads checkpoint after their own writes).

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
import sqlite3
import threading
import time
from pathlib import Path

from punctual.engines.embedded import pid

logger = logging.getLogger("punctual.embedded")

# A pause this long in this process's commits starts a copy (a claim burst's pages are written
# in one go: its transactions follow each other within milliseconds).
QUIET_S = 0.25
# At most this long between a commit and its copy: longer than a claim burst of 20,000 due jobs
# at 10M stored (~2 s on this machine, up to ~3 s under load; a copy at 2 s measured a quarter
# slower claims in the burst's last part), and at the highest page rate measured here (a 10M-job
# claim, ~15,000 pages/s) a pass copies up to ~75,000 pages, below the writers' own bound.
MAX_WAIT_S = 5.0
POLL_S = 0.05  # how often the thread looks while a copy waits (with nothing to copy it sleeps until a commit)
# A pass that could not copy every frame (a reader still uses older pages, or another connection
# was checkpointing) is tried again this much later, even if no commit follows.
RETRY_S = 1.0


class Checkpointer:
    """A background ``PRAGMA wal_checkpoint(PASSIVE)`` for one database file, after this process's
    writes pause for ``quiet_s`` or at most ``max_wait_s`` after a commit (see the module docstring).

    :meth:`wrote` is called after every commit (``Database.write``).
    """

    def __init__(self, path: Path, *, quiet_s: float = QUIET_S, max_wait_s: float = MAX_WAIT_S) -> None:
        self._path = path
        self._quiet_s = quiet_s
        self._max_wait_s = max_wait_s
        # monotonic times: the last commit, and the first commit not yet copied (None: none waits)
        self._last_write = 0.0
        self._dirty_since: float | None = None
        self._not_before = 0.0  # no pass before this monotonic time (after an incomplete one)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by the commit that leaves nothing copied behind (wrote)
        self._pid = 0
        self.checkpoints = 0  # passes that copied frames back (tests and diagnostics)

    def ensure_started(self) -> None:
        """Start the thread in this process unless it runs already (cheap when it does)."""
        if self._pid == pid.current() and self._thread is not None:
            return
        with self._lock:
            if self._pid == pid.current() and self._thread is not None:
                return
            self._pid, self._stop, self._wake = pid.current(), threading.Event(), threading.Event()
            self._thread = threading.Thread(
                target=self._run,
                args=(self._stop, self._wake),
                name=f"punctual-checkpoint-{self._path.name}",
                daemon=True,
            )
            self._thread.start()

    def wrote(self) -> None:
        """A commit just ended in this process (two attribute writes: cheap on every commit; the
        first commit after a copy also wakes the thread)."""
        now = time.monotonic()
        self._last_write = now
        if self._dirty_since is None:
            self._dirty_since = now
            self._wake.set()

    def due(self, now: float) -> bool:
        """Whether a copy should start at monotonic time ``now``."""
        dirty_since = self._dirty_since
        if dirty_since is None or now < self._not_before:
            return False
        return now - self._last_write >= self._quiet_s or now - dirty_since >= self._max_wait_s

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop this process's thread. Idempotent."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is None or self._pid != pid.current():
                return
            self._stop.set()
            self._wake.set()
        thread.join(timeout_s)

    def _run(self, stop: threading.Event, wake: threading.Event) -> None:
        try:
            conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            logger.warning("no background checkpoints for %s: %s", self._path, exc)
            return
        try:
            conn.execute("PRAGMA busy_timeout = 0")  # PASSIVE: a busy checkpoint lock means another does it
            conn.execute("PRAGMA cache_size = -1024")  # a checkpoint copies pages through no page cache
            while not stop.is_set():
                if self._dirty_since is None:  # nothing to copy: sleep until a commit (or stop)
                    wake.wait()
                    wake.clear()  # a commit after this sees _dirty_since set, the next loop too
                    continue
                if stop.wait(min(POLL_S, self._quiet_s)):
                    break
                if self.due(time.monotonic()):
                    # cleared before the copy: a commit during it is copied by the next pass
                    self._dirty_since = None
                    self._checkpoint(conn)
        finally:
            conn.close()

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        try:
            busy, log, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:  # e.g. the file was removed under us: the writers' fallback remains
            logger.debug("background checkpoint of %s failed: %s", self._path, exc)
            return
        if not busy and copied > 0:
            self.checkpoints += 1
        if busy or copied < log:  # frames left behind: again in RETRY_S, commit or not
            now = time.monotonic()
            self._not_before = now + RETRY_S
            if self._dirty_since is None:
                self._dirty_since = now
