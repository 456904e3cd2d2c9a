"""What a :class:`~punctual.port.store.Store` offers the runs that wait for their owner's limits (a
mixin of the Store): their notes written in batches (compare-and-set changes of many runs at once,
one write per batch where the engine can), and the end of a slot-wait mark its writer no longer
needs (``punctual.tenancy.handoff``).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Protocol

from punctual.errors import ConcurrentModification, RunNotFound
from punctual.model import Run
from punctual.port.records import RunChange


class _TransitionsRuns(Protocol):
    def transition_run(self, current: Run, change: RunChange) -> Run: ...


class LimitWaits:
    """See the module docstring."""

    def transition_runs(self: _TransitionsRuns, changes: Sequence[tuple[Run, RunChange]]) -> list[Run | None]:
        """``transition_run`` of each (run as read, change): the run as changed, or None where the
        stored run changed since it was read or is gone (nothing written for it). Each change
        applies or not on its own.

        Here one ``transition_run`` per run; the embedded engine writes them in one transaction.
        """
        changed: list[Run | None] = []
        for current, change in changes:
            try:
                changed.append(self.transition_run(current, change))
            except (ConcurrentModification, RunNotFound):
                changed.append(None)
        return changed

    @abstractmethod
    def clear_slot_wait(self, owner: str, priority: int, until: int) -> bool:
        """End the mark of ``priority`` iff it is still ``until`` (a later mark stays). True if it ended."""
