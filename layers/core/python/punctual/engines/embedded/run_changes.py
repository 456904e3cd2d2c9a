"""The embedded engine's batched compare-and-set run changes (``Store.transition_runs``): one
``BEGIN IMMEDIATE`` transaction for a whole batch, each change decided on the row it read there."""

from __future__ import annotations

from collections.abc import Sequence

from punctual import rules
from punctual.engines.embedded.db import Database
from punctual.engines.embedded.runs import load_run, save_run
from punctual.model import Run
from punctual.port import RunChange


class EmbeddedRunChanges:
    """A mixin of :class:`~punctual.engines.embedded.store.EmbeddedStore`."""

    _db: Database

    def transition_runs(self, changes: Sequence[tuple[Run, RunChange]]) -> list[Run | None]:
        if not changes:
            return []
        changed: list[Run | None] = []
        with self._db.write() as conn:
            for current, change in changes:
                stored = load_run(conn, current.job_id, current.scheduled_at)
                if stored is None or not rules.unchanged_since(stored, current):
                    changed.append(None)
                    continue
                run = rules.apply_change(stored, change)
                save_run(conn, run)
                changed.append(run)
        return changed
