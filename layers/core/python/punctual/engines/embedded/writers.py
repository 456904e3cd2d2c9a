"""The queue of writers in front of SQLite's write lock: one thread of one process at a time.

SQLite does not queue writers. A ``BEGIN IMMEDIATE`` that finds the lock taken fails at once (or,
with a busy timeout, sleeps in growing steps of up to 100 ms and tries again), so a writer that
waits polls. ``db._begin_immediate`` polled every 0.1-1 ms; in a 20,000-run burst each worker
process spent ~60 ms of CPU on ~600 failed attempts (a statement, an exception and a sleep each:
~6 us per run of the two workers), and a writer woke up to a millisecond after the lock was freed.

So writers queue before they ask SQLite:

- the threads of one process on a ``threading.Lock`` per file (as before);
- the processes on an exclusive ``flock`` of a lock file beside the database
  (``<name>.writers``): the kernel puts a waiting writer to sleep and wakes it when the holder
  lets go, or when the holder dies (a killed process's locks are dropped with its files).

``BEGIN IMMEDIATE`` then finds the lock free, except when a writer that does not queue here holds
it (the ``sqlite3`` shell, a wal_checkpoint(TRUNCATE)); ``db._begin_immediate`` still polls for
those. SQLite's own files are never opened here: a ``flock`` on another file is a lock of its
open file description, which closing no other handle drops (unlike the POSIX locks SQLite uses,
see ``checkpoint``). Where ``fcntl`` does not exist (Windows), processes poll as before.

The wait has no timeout (``flock`` has none): the holder is a write transaction whose statements
are bounded by the busy timeout. A holder that is stopped (SIGSTOP) keeps the others waiting until
it resumes; it would also hold SQLite's lock, which they could not take either.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: processes poll SQLite's lock instead
    fcntl = None  # type: ignore[assignment]

LOCK_SUFFIX = ".writers"


class _Queue:
    """This process's place in the writers' queue of one database file."""

    __slots__ = ("fd", "path", "threads")

    def __init__(self, path: str) -> None:
        self.path = path
        self.threads = threading.Lock()
        self.fd: int | None = None  # opened on first use

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        with self.threads:
            fd = self._fd()
            if fd is None:
                yield
                return
            fcntl.flock(fd, fcntl.LOCK_EX)  # sleeps (without the GIL) until no other process holds it
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _fd(self) -> int | None:
        if self.fd is None and fcntl is not None:
            try:
                self.fd = os.open(self.path + LOCK_SUFFIX, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            except OSError:  # a read-only directory: SQLite's lock alone, polled
                return None
        return self.fd

    def forget(self) -> None:
        """In a forked child: its parent's descriptor shares the parent's lock, so it is let go."""
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None
        self.threads = threading.Lock()  # a parent thread may have held it at the fork


_QUEUES: dict[str, _Queue] = {}
_GUARD = threading.Lock()


@contextlib.contextmanager
def turn(path: str) -> Iterator[None]:
    """Wait for this thread's turn to write the database at ``path`` (its real path), and hold it."""
    with _GUARD:
        queue = _QUEUES.get(path)
        if queue is None:
            queue = _QUEUES[path] = _Queue(path)
    with queue.turn():
        yield


def _forget_all() -> None:
    global _GUARD
    _GUARD = threading.Lock()
    for queue in _QUEUES.values():
        queue.forget()


os.register_at_fork(after_in_child=_forget_all)
