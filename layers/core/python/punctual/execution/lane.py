"""The lane of a worker's due deliveries while runs wait for concurrency slots: best first, not first come.

A worker leases what it receives one batch at a time on its instant thread (``batch.prepare``),
in the order the batches arrived. While an owner's backlog waits for its slots, that order is the
backlog's: thousands of its runs knock (come back after their backoff), and a run woken for a freed
slot (``punctual.tenancy.line``) or an urgent one would queue behind every batch received before
it, and its slot stay free meanwhile. So, while this worker's gate has runs in line, deliveries
due now join one lane instead, and each turn takes the best of it (:data:`TURN` at most), merged
into one batch: the runs woken for a slot first, then runs in line above the default priority,
then fresh deliveries in arrival order (their jobs, hence priorities, are read in the batch), then
the other runs in line, each group by its place (:meth:`punctual.tenancy.line.Line.standing`).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from dataclasses import dataclass, field

from punctual.port import Delivery

TURN = 500  # deliveries leased in one turn of the lane at most

Standing = tuple[int, int, int]  # (group, -priority, place): smaller goes first
FRESH = 2  # the group of a delivery whose run is not in line (a fresh one, or another worker's)


@dataclass(slots=True)
class Lane:
    """Deliveries due now, by standing (see the module docstring); touched only on the loop."""

    heap: list[tuple[Standing, int, Delivery, asyncio.Future[bool]]] = field(default_factory=list)
    busy: bool = False  # a task is taking turns
    _order: itertools.count[int] = field(default_factory=itertools.count)

    def add(self, delivery: Delivery, standing: Standing | None, done: asyncio.Future[bool]) -> None:
        """``delivery`` waits for a turn; ``done`` is set once its turn was taken (and its call started)."""
        seq = next(self._order)
        heapq.heappush(self.heap, (standing or (FRESH, 0, seq), seq, delivery, done))

    def take(self) -> list[tuple[Delivery, asyncio.Future[bool]]]:
        """The best :data:`TURN` deliveries waiting, out of the lane."""
        taken: list[tuple[Delivery, asyncio.Future[bool]]] = []
        while self.heap and len(taken) < TURN:
            _, _, delivery, done = heapq.heappop(self.heap)
            taken.append((delivery, done))
        return taken
