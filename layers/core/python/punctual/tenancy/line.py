"""A worker's line of runs waiting for a concurrency slot: who gets a freed slot first.

A run refused a slot (``SlotOutcome.FULL`` or ``YIELDED``) is hidden for a short backoff and comes
back on its own (``punctual.tenancy.admission``). Left at that, a slot freed meanwhile goes to
whichever run knocks first: a fresh run of lower priority as well as an urgent one that has waited
for seconds. So each worker keeps the runs *it* refused in a line per slot scope, ordered by
priority (highest first), then by how long each has waited (since its first refusal), and hands a
freed slot over: when this worker frees a slot of a scope (a finish, or a slot given back), the
first run in that scope's line is *woken* (its message made visible at once: ``Queue.extend`` with
0, one batched request per settle). It comes back within a receive instead of after its backoff,
while the store's waiting marks keep runs of lower priority off the free slot until it does.

What the line promises, and what it does not:

- It is a hint, never a guarantee the store relies on: the slot count is the store's alone. A woken
  run that finds the slot taken is refused again and keeps its place (its first refusal's time).
- It is per worker process. Another worker's waiters are ordered by the store's marks (a run of
  lower priority yields while a higher one waits), not by this line; nothing is written for it.
- A waiter's place lasts until its expected return plus slack (``until``): a run that never comes
  back (its job deleted, its worker's message re-sent) leaves the line by itself. At most
  :data:`MAX_WAITERS` places are kept; past that, the line starts over (waiters come back on their
  own, as without it).

Thread-safe: the worker admits on one thread and settles on others.
"""

from __future__ import annotations

import heapq
import threading
from dataclasses import dataclass

from punctual.model.limits import DEFAULT_PRIORITY

MAX_WAITERS = 200_000  # places kept in all lines of one worker (about 200 bytes each)
WOKEN_GRACE_MS = 1_000  # a woken run counts as waiting this long, or until it comes back


@dataclass(slots=True)
class Place:
    """One run's place in a scope's line."""

    priority: int
    since: int  # its first refusal (epoch ms): the line is ordered by (-priority, since)
    receipt: str  # the message that brings it back (woken through it)
    queue: str  # the name of the queue that message is in
    until: int  # its place lasts until then (epoch ms)
    queued: bool = False  # in the scope's heap (not woken since it last joined)


@dataclass(slots=True)
class _Scope:
    """One scope's line: its places by priority, a heap of (-priority, since, run id) to wake from,
    and the places woken and not back yet (each holds a freed slot's claim: :meth:`Line.woken_ahead`)."""

    places: dict[int, dict[str, Place]]
    heap: list[tuple[int, int, str]]
    woken: dict[str, Place]


class Line:
    """The runs this worker refused a slot, per scope (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scopes: dict[str, _Scope] = {}
        self._scope_of: dict[str, str] = {}  # run id -> the scope whose line it last joined
        self._count = 0

    def join(self, scope: str, run_id: str, *, priority: int, receipt: str, queue: str, now: int, until: int) -> None:
        """``run_id`` of ``priority`` was refused a slot of ``scope`` now and comes back through
        ``receipt`` (of ``queue``) by ``until``. A run already in line keeps its place."""
        with self._lock:
            if self._count >= MAX_WAITERS:
                self._scopes.clear()
                self._scope_of.clear()
                self._count = 0
            line = self._scopes.get(scope)
            if line is None:
                line = self._scopes[scope] = _Scope({}, [], {})
            place = _find(line, run_id)
            if place is not None and place.priority != priority:  # its job's priority changed: a new place
                self._drop(scope, line, run_id, place)
                place = None
            if place is None:
                self._count += 1
                place = line.places.setdefault(priority, {})[run_id] = Place(priority, now, receipt, queue, until)
            else:
                place.receipt, place.queue, place.until = receipt, queue, max(place.until, until)
                line.woken.pop(run_id, None)  # back, and refused again: it waits for the next freed slot
            self._scope_of[run_id] = scope
            if not place.queued:
                place.queued = True
                heapq.heappush(line.heap, (-priority, place.since, run_id))

    def leave(self, scope: str, run_id: str) -> int | None:
        """``run_id`` took a slot of ``scope``: it leaves that line. Returns its priority if no
        other run of that priority waits in the line any more (its waiting mark may go), else None."""
        with self._lock:
            line = self._scopes.get(scope)
            place = None if line is None else _find(line, run_id)
            if line is None or place is None:
                return None
            self._drop(scope, line, run_id, place)
            return place.priority if place.priority not in line.places else None

    def since(self, scope: str, run_id: str) -> int | None:
        """When ``run_id`` joined ``scope``'s line (None: it is not in it): its place among its priority."""
        with self._lock:
            line = self._scopes.get(scope)
            place = None if line is None else _find(line, run_id)
            return None if place is None else place.since

    def standing(self, run_id: str) -> tuple[int, int, int] | None:
        """Where a delivery of ``run_id`` goes in the worker's lane (``punctual.execution.lane``):
        (0 woken for a freed slot, 1 in line above the default priority, 3 in line otherwise;
        -priority; its place), or None if it is in no line."""
        with self._lock:
            scope = self._scope_of.get(run_id)
            line = None if scope is None else self._scopes.get(scope)
            place = None if line is None else _find(line, run_id)
            if line is None or place is None:
                return None
            group = 0 if run_id in line.woken else 1 if place.priority > DEFAULT_PRIORITY else 3
            return group, -place.priority, place.since

    def waiting_above(self, scope: str, priority: int, now: int) -> bool:
        """Whether a run of higher priority than ``priority`` waits in ``scope``'s line now (one
        woken and not yet back included, for ``WOKEN_GRACE_MS``)."""
        with self._lock:
            line = self._scopes.get(scope)
            if line is None:
                return False
            for higher in [p for p in line.places if p > priority]:
                places = line.places[higher]
                for run_id in [r for r, place in places.items() if place.until < now]:  # gone: no longer waits
                    self._drop(scope, line, run_id, places[run_id])
                if higher in line.places:
                    return True
            return False

    def woken_ahead(self, scope: str, run_id: str, priority: int, now: int) -> int:
        """How many runs woken for freed slots of ``scope`` and not back yet rank ahead of ``run_id``
        (of ``priority``; behind every run of its priority in line if it is not in line itself):
        their slots are theirs, a run behind them takes only a slot beyond those."""
        with self._lock:
            line = self._scopes.get(scope)
            if line is None or not line.woken:
                return 0
            mine = _find(line, run_id)
            rank = (-priority, LAST_PLACE if mine is None else mine.since)
            ahead = 0
            for other, place in list(line.woken.items()):
                if place.until < now:  # it never came back
                    del line.woken[other]
                elif other != run_id and (-place.priority, place.since) < rank:
                    ahead += 1
            return ahead

    def wake(self, scope: str, queue: str, now: int) -> str | None:
        """The receipt of the first run in ``scope``'s line whose message is in ``queue``, now woken
        (it counts as waiting until it is back, for ``WOKEN_GRACE_MS`` at most); None if none waits."""
        with self._lock:
            line = self._scopes.get(scope)
            while line is not None and line.heap:
                neg_priority, since, run_id = heapq.heappop(line.heap)
                place = line.places.get(-neg_priority, {}).get(run_id)
                if place is None or not place.queued or place.since != since:
                    continue  # left the line, or an entry of an earlier place
                place.queued = False
                if place.until < now:  # it never came back: its place is gone
                    self._drop(scope, line, run_id, place)
                    if not line.places:
                        return None
                    continue
                if place.queue != queue:
                    continue  # a message of another queue: it comes back on its own
                place.until = min(place.until, now + WOKEN_GRACE_MS)
                line.woken[run_id] = place
                return place.receipt
            return None

    def __len__(self) -> int:
        with self._lock:
            return self._count

    def _drop(self, scope: str, line: _Scope, run_id: str, place: Place) -> None:
        places = line.places[place.priority]
        del places[run_id]
        line.woken.pop(run_id, None)
        if self._scope_of.get(run_id) == scope:
            del self._scope_of[run_id]
        self._count -= 1
        if not places:
            del line.places[place.priority]
            if not line.places and self._scopes.get(scope) is line:
                del self._scopes[scope]  # its heap holds only entries of places gone


LAST_PLACE = 2**63  # the place of a run not in line: behind every run of its priority that is


def _find(line: _Scope, run_id: str) -> Place | None:
    for places in line.places.values():  # a few priorities at most
        place = places.get(run_id)
        if place is not None:
            return place
    return None
