"""Compare-and-set changes of many runs at once (a mixin of :class:`~punctual.port.store.Store`):
what a worker writes on the runs of a batch that wait for their owner's limits (their note and
deadline), one write per batch where the engine can."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from punctual.errors import ConcurrentModification, RunNotFound
from punctual.model import Run
from punctual.port.records import RunChange


class _TransitionsRuns(Protocol):
    def transition_run(self, current: Run, change: RunChange) -> Run: ...


class RunChanges:
    """What a Store adds over ``transition_run`` (see :class:`~punctual.port.store.Store`)."""

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
