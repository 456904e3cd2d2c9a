"""One key of the ``wire`` pool: its slots, its queue, its idle connections, and how many slots
it may use (:class:`Host`), which grows while its answers are slow.

Why the slots grow instead of starting at the ceiling: a connection costs its opening (~35 us of
the worker's CPU on this machine, three system calls and a handshake, and an accept on the
target's side) and a burst opens every slot it may use. Against a target that answers at once,
more connections than :data:`START_PER_KEY` add no throughput (the CPU is the bound: each answer
comes back within ~10 ms), only opening costs: 1,024 connections per worker for 10,000 runs were
~3.5 us per run. Against a slow target (a webhook that takes 200 ms) the throughput is the slots
divided by the answer time, and every slot up to the ceiling counts. So a key starts with
:data:`START_PER_KEY` slots and, while calls queue, grows up to ``max_per_key``: when no answer came
for :data:`SLOW_S` (the target holds every request it was sent), every queued call gets a slot at
once, and takes one of the connections opened ahead of the burst (``WirePool.warm``) if any is
idle; when answers come but the last one took that long, the slots double.

The loop's own delay is not mistaken for a slow target: a check that runs more than
:data:`CHECK_S` late (the loop was busy starting thousands of calls, so answers waited on it, not
on the target) does not grow the key; it looks again :data:`CHECK_S` later.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from punctual.execution.targets.wire import Call, WireConnection

START_PER_KEY = 256  # slots a key starts with (at most its ceiling)
SLOW_S = 0.05  # an answer this slow, or none for this long, while calls queue: more slots
CHECK_S = 0.025  # how often a key with queued calls is looked at (and how late a check may run)

SLOT: Any = object()  # a queued call's future: "a slot is yours, find a connection"


class Host:
    """One pool key: its free connection slots, the calls queued for one (first come, first served)
    and its idle connections. Invariant: calls are queued only while no slot is free; ``limit``
    slots exist (free or held by a call), at most ``ceiling``."""

    __slots__ = ("answered_at", "ceiling", "check", "free", "held", "idle", "latency", "limit", "queue", "warming")

    def __init__(self, start: int, ceiling: int) -> None:
        self.limit = min(start, ceiling)
        self.ceiling = ceiling
        self.free = self.limit
        self.queue: deque[Call] = deque()
        self.idle: list[WireConnection] = []
        self.warming = 0  # connections being opened ahead of calls (WirePool.warm)
        self.held = 0  # calls armed ahead of their instant, not yet let go (WirePool.arm)
        self.check: asyncio.TimerHandle | None = None  # the next look at whether to grow
        self.answered_at = 0.0  # monotonic seconds: the last answer (or the start of the wait)
        self.latency = 0.0  # seconds from the last answered request's write to its answer

    def watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Calls queue: look :data:`CHECK_S` from now whether the key should grow (once per wait)."""
        if self.check is None and self.limit < self.ceiling:
            now = time.monotonic()
            self.answered_at = max(self.answered_at, now)  # no answer yet counts from here
            self.check = loop.call_later(CHECK_S, self._look, loop, now + CHECK_S)

    def unwatch(self) -> None:
        """Forget the next look (the pool is closing)."""
        if self.check is not None:
            self.check.cancel()
            self.check = None

    def answered(self, sent_at: float) -> None:
        """A request written at ``sent_at`` got its answer (or its end): remembered while watched."""
        if self.check is not None:
            now = self.answered_at = time.monotonic()
            self.latency = now - sent_at

    def _look(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        self.check = None
        if not self.queue or self.limit >= self.ceiling:
            return
        now = time.monotonic()
        if now - due <= CHECK_S:  # on time: the loop was free to read any answer that came
            if now - self.answered_at >= SLOW_S:  # silent: every slot holds a request for that long
                self._grow(self.limit + len(self.queue))
            elif self.latency >= SLOW_S:
                self._grow(2 * self.limit)
        if self.queue and self.limit < self.ceiling:
            self.check = loop.call_later(CHECK_S, self._look, loop, now + CHECK_S)

    def _grow(self, slots: int) -> None:
        """At least ``slots`` slots (up to the ceiling), the new ones to the calls queued first."""
        self.widen(slots)
        self.latency = 0.0  # the next answers tell whether this was enough

    def widen(self, slots: int) -> None:
        """At least ``slots`` slots (up to the ceiling); the new ones go to the calls queued first.
        Also used when connections are opened ahead of a burst (``WirePool.warm``): slots with a
        connection already open cost nothing more, so the burst starts with all of them."""
        added = max(0, min(slots, self.ceiling) - self.limit)
        self.limit += added
        while added and self.queue:
            entry = self.queue.popleft()
            future = entry.future
            if future is not None and not future.done():  # else it was cut while queued
                entry.owned = True
                future.set_result(SLOT)
                added -= 1
        self.free += added

    def take_idle(self) -> WireConnection | None:
        """The newest idle connection still usable (those found closed meanwhile are dropped), or None."""
        idle = self.idle
        while idle:
            connection = idle.pop()
            if connection.usable():
                return connection
            connection.close()
        return None

    def unused(self) -> bool:
        """Nothing left: no idle connection, no call holding, waiting for or armed for a slot, none opening."""
        return not self.idle and not self.queue and self.free == self.limit and not self.warming and not self.held
