"""Bounded waits on a condition, for the tiers that run real threads and processes (e2e, faults,
infra): poll, never sleep for a guessed while. Standard library only (a target process that the
e2e tier spawns imports it too).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

POLL_S = 0.1


def wait_until(
    condition: Callable[[], Any],
    timeout_s: float = 20.0,
    what: str = "condition",
    explain: Callable[[], str] | None = None,
    *,
    every_s: float = POLL_S,
) -> Any:
    """Poll ``condition`` every ``every_s`` until it returns something truthy, and return that.

    Raises AssertionError after ``timeout_s``, naming ``what`` and, when ``explain`` is given, what
    it says was left (called once, on the timeout: e.g. the runs still open, a process's output).
    """
    value = _poll(condition, timeout_s, every_s)
    if value:
        return value
    left = f": {explain()}" if explain is not None else ""
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}{left}")


def eventually(condition: Callable[[], Any], timeout_s: float, *, every_s: float = POLL_S) -> bool:
    """Whether ``condition`` returned something truthy within ``timeout_s`` (polled every ``every_s``);
    never raises, for ``assert eventually(...), <what was left>``."""
    return bool(_poll(condition, timeout_s, every_s))


def _poll(condition: Callable[[], Any], timeout_s: float, every_s: float) -> Any:
    """``condition``'s first truthy value within ``timeout_s``, else its last (falsy) one."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(every_s)
