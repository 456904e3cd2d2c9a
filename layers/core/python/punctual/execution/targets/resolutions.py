"""Names resolved and checked recently: the SSRF guard's verdicts, kept for ``ttl_s``.

A webhook is a name, and a burst sends thousands of attempts to the same few names within a
second. Resolving each one meant a ``getaddrinfo`` per attempt: ~20 µs of CPU with the answer in
``/etc/hosts``, a resolver round trip otherwise, and (on the worker's loop) a thread hop per
attempt, since a name cannot be resolved on the loop. HTTP clients keep answers for a while for
this reason (aiohttp: 10 s by default); so do we, for the same 10 s.

What is kept is only an *allowed* verdict: the address that ``http.resolve`` checked against a
policy (every address of the answer was checked), under that same policy. Every attempt is still
pinned to a checked address: a name whose DNS turns to a refused address (rebinding) keeps going
to the address that was checked until the entry expires, then is resolved again and refused.
Refusals and DNS failures are not kept (the next attempt asks again).

One cache per process, shared by the worker's loop (reads only: a dictionary lookup) and the
threads that resolve (writes under a lock).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

TTL_S = 10.0
MAX_NAMES = 4_096  # names kept at most; past it, expired ones go first, then all

Key = tuple[str, int, Any]  # (host, port, the TargetPolicy it was checked under)


class Resolutions:
    """``(host, port, policy) -> checked address`` for ``ttl_s`` (``now``: monotonic seconds)."""

    def __init__(self, *, ttl_s: float = TTL_S, max_names: int = MAX_NAMES, now: Callable[[], float] = time.monotonic):
        self.ttl_s, self.max_names, self.now = ttl_s, max_names, now
        self._entries: dict[Key, tuple[float, str]] = {}
        self._lock = threading.Lock()

    def get(self, host: str, port: int, policy: Any) -> str | None:
        """The address checked for this name under ``policy`` less than ``ttl_s`` ago, else None."""
        entry = self._entries.get((host, port, policy))
        if entry is None or entry[0] <= self.now():
            return None
        return entry[1]

    def put(self, host: str, port: int, policy: Any, address: str) -> None:
        """Keep ``address``, which ``policy`` allowed for this name just now."""
        now = self.now()
        with self._lock:
            if len(self._entries) >= self.max_names:
                self._entries = {key: entry for key, entry in self._entries.items() if entry[0] > now}
                if len(self._entries) >= self.max_names:
                    self._entries = {}
            self._entries[host, port, policy] = (now + self.ttl_s, address)

    def clear(self) -> None:
        with self._lock:
            self._entries = {}


RESOLUTIONS = Resolutions()
