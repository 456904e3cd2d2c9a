"""This process's id, without a system call per use.

``os.getpid()`` is a system call (glibc stopped caching it), and the engine asks on every
connection lookup and every commit, to tell a forked child from its parent: a burst of 20,000 runs
made ~32,000 of them per worker. The id is read once and again in every child after ``fork``.
"""

from __future__ import annotations

import os

_pid = os.getpid()


def current() -> int:
    """``os.getpid()``, kept current across ``fork`` by :func:`os.register_at_fork`."""
    return _pid


def _after_fork_in_child() -> None:
    global _pid  # the one process-wide value, rewritten only in a new child
    _pid = os.getpid()


os.register_at_fork(after_in_child=_after_fork_in_child)
