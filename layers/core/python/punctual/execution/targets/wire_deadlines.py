"""Deadlines of the ``wire`` client's waits, with one loop timer for all of them (:class:`Deadlines`)."""

from __future__ import annotations

import asyncio
import heapq
from typing import Any


class Deadlines:
    """Cuts waits at their deadlines with one loop timer for all of them.

    A timer per call (``loop.call_at`` or ``asyncio.timeout``) costs 3-6 us on uvloop, as much as
    the rest of a keep-alive exchange; here a deadline joins the bucket of its 10 ms slot (a dict
    insert) and one timer fires per slot that still holds a wait, failing it with ``TimeoutError``.
    A bucket is dropped as soon as its last wait ends (thousands of calls a second would otherwise
    keep a table per slot for a whole timeout), and the timer is armed only for a slot with waits.
    """

    RESOLUTION_S = 0.01

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._buckets: dict[int, dict[asyncio.Future[Any], None]] = {}
        self._slots: list[int] = []  # heap of slots, each at most once (``_queued``), some without bucket
        self._queued: set[int] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_slot = 0

    def add(self, deadline: float, waiter: asyncio.Future[Any]) -> int:
        """Fail ``waiter`` with ``TimeoutError`` at ``deadline`` unless it is done; returns its slot."""
        slot = int(deadline / self.RESOLUTION_S) + 1  # never early: the slot's end
        bucket = self._buckets.get(slot)
        if bucket is None:
            bucket = self._buckets[slot] = {}
            if slot not in self._queued:
                self._queued.add(slot)
                heapq.heappush(self._slots, slot)
            if self._timer is None or slot < self._timer_slot:
                self._arm(slot)
        bucket[waiter] = None
        return slot

    def discard(self, slot: int, waiter: asyncio.Future[Any]) -> None:
        bucket = self._buckets.get(slot)
        if bucket is not None:
            bucket.pop(waiter, None)
            if not bucket:
                del self._buckets[slot]

    def pending(self) -> int:
        """Waits not yet done or discarded (for tests)."""
        return sum(len(bucket) for bucket in self._buckets.values())

    def _arm(self, slot: int) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_slot = slot
        self._timer = self.loop.call_at(slot * self.RESOLUTION_S, self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = self.loop.time()
        slots, buckets = self._slots, self._buckets
        # due slots expire their waits; slots whose waits all ended are dropped on the way
        while slots and (slots[0] * self.RESOLUTION_S <= now or slots[0] not in buckets):
            slot = heapq.heappop(slots)
            self._queued.discard(slot)
            for waiter in buckets.pop(slot, ()):
                if not waiter.done():
                    waiter.set_exception(TimeoutError())
        if slots:
            self._arm(slots[0])
