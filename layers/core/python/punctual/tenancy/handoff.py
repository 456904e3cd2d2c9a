"""The gate's side of handing freed concurrency slots over (a mixin of
:class:`punctual.tenancy.admission.Gate`), and the slot refusals of one batch (:class:`Refusals`).

A run refused a slot marks its priority as waiting in the store (``Store.mark_slot_wait``: runs of
lower priority, on any worker, yield a free slot while the mark lasts) and, once its message waits
hidden, takes its place in this worker's line for that scope (``punctual.tenancy.line``). A slot
this worker frees is handed to the first in line (:meth:`HandOff.take_wakes`: the caller wakes its
message), and the slots handed to runs on their way back are kept for them
(``Line.woken_ahead``). When the last run of a priority in this worker's line takes its slot, the
mark this worker wrote for that priority ends (``Store.clear_slot_wait``), unless another worker's
later mark replaced it: lower priorities then go on at once instead of waiting the mark out.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from punctual.port import SlotOutcome, Store
from punctual.tenancy.line import LAST_PLACE, Line

if TYPE_CHECKING:
    from punctual.tenancy.admission import Admission

# A run refused a slot marks its priority as waiting until it is back: its wait, plus a second for
# whole-second message visibility, plus slack. A worker renews its mark once it covers less than
# MARK_RENEW_MS past a new wait (about one write per priority, scope and worker per second).
MARK_GRACE_MS = 2_000
MARK_RENEW_MS = 1_500
MAX_FREED = 10_000  # freed slots remembered until take_wakes hands them over


@dataclass(slots=True)
class Refusals:
    """The slot refusals of one batch (``Gate.admit``'s ``seen``): per scope, the outcome and the
    priority of the first run refused there, and the runs holding its slots (read once, when a
    later run of the batch would be refused the same way)."""

    refused: dict[str, tuple[SlotOutcome, int]] = field(default_factory=dict)
    holders: dict[str, frozenset[str]] = field(default_factory=dict)

    def may_hold(self, store: Store, scope: str, run_id: str) -> bool:
        """Whether ``run_id`` held a slot of ``scope`` when the batch first looked (then the store
        decides: ALREADY_HELD lets a takeover start in the slot its run holds). A run that did not
        hold one then cannot have taken one since: only its own admission takes it."""
        held = self.holders.get(scope)
        if held is None:
            held = self.holders[scope] = frozenset(store.slot_holders(scope))
        return run_id in held


class HandOff:
    """The hand-off state of a gate: its marks, its line, the slots it freed (module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._marks: dict[tuple[str, int], int] = {}  # (scope, priority) -> the mark this worker last wrote
        self.line = Line()  # the runs this worker refused a slot, in hand-off order (punctual.tenancy.line)
        self._freed: list[str] = []  # scopes of the slots freed since the last take_wakes, once per slot
        self._freed_lock = threading.Lock()

    def place(self, run_id: str, scopes: Sequence[str]) -> int:
        """Where ``run_id`` stands in this worker's lines of ``scopes`` (when it first joined one of
        them; a run in none stands behind those that are): a batch is admitted in this order among
        runs of one priority, so a run handed a slot is not refused it for one that came later."""
        found = [since for scope in scopes if (since := self.line.since(scope, run_id)) is not None]
        return min(found, default=LAST_PLACE)

    def _yields(self, scope: str, priority: int, now: int) -> bool:
        """Whether a run of higher priority than ``priority`` waits in this worker's line for a slot
        of ``scope`` now (the store would say so too, by its mark: the knocks of a backlog yielding
        to a few urgent runs stay cheap, so the urgent ones come back sooner)."""
        return self.line.waiting_above(scope, priority, now)

    def line_up(self, admission: Admission, receipt: str, queue: str) -> None:
        """``admission`` refused a slot and its message (``receipt`` of ``queue``) now waits hidden:
        the run takes (or keeps) its place in that scope's line, to be woken when this worker frees
        a slot there (:meth:`take_wakes`). Call it once the message is hidden, not before: a wake
        that came first would be undone by the hide."""
        if admission.admitted or not admission.scope or admission.retry_at is None:
            return
        until = admission.retry_at + MARK_GRACE_MS
        self.line.join(
            admission.scope,
            admission.run_id,
            priority=admission.priority,
            receipt=receipt,
            queue=queue,
            now=admission.at,
            until=until,
        )

    def take_wakes(self, queue: str, now: int) -> list[str]:
        """The receipts (of ``queue``) of the runs to wake for the slots freed since the last call:
        the first in line of each freed slot's scope. The caller makes them visible at once."""
        with self._freed_lock:
            freed, self._freed = self._freed, []
        return [receipt for scope in freed if (receipt := self.line.wake(scope, queue, now)) is not None]

    def _left_line(self, scope: str, run_id: str, now: int) -> None:
        """``run_id`` holds a slot of ``scope``: it leaves this worker's line there, and the last of
        its priority to leave withdraws the waiting mark this worker wrote for it (the store's
        ``clear_slot_wait``, if no later mark replaced it): lower priorities need not wait it out."""
        priority = self.line.leave(scope, run_id)
        if priority is None:
            return
        until = self._marks.pop((scope, priority), None)
        if until is not None and until >= now:
            self.store.clear_slot_wait(scope, priority, until)

    def _free(self, scope: str, run_id: str) -> None:
        """Release the slot ``run_id`` holds in ``scope``; a slot freed is one to hand over."""
        if self.store.release_slot(scope, run_id):
            with self._freed_lock:
                if len(self._freed) < MAX_FREED:  # bounded for a caller that never takes its wakes
                    self._freed.append(scope)

    def _mark(self, scope: str, priority: int, back_at: int) -> None:
        if self._marks.get((scope, priority), 0) >= back_at + MARK_RENEW_MS:
            return
        until = back_at + MARK_GRACE_MS
        self.store.mark_slot_wait(scope, priority, until)
        if len(self._marks) > 100_000:  # bounded: scopes come and go
            self._marks.clear()
        self._marks[(scope, priority)] = until
