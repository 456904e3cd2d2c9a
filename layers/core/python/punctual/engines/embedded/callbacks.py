"""The embedded engine's part of async completion (``punctual.port.callbacks``): a callback's
heartbeat and completion, each one ``BEGIN IMMEDIATE`` transaction that reads the run and decides
with ``rules.callback_open``, and the accepted runs past their deadline, read from the partial index
``runs_accepted`` (schema v14). A mixin of :class:`~punctual.engines.embedded.store.EmbeddedStore`.
"""

from __future__ import annotations

from punctual import rules
from punctual.engines.embedded.db import Database
from punctual.engines.embedded.runs import load_run, save_run
from punctual.engines.embedded.schema_callbacks import ACCEPTED_RUN_SQL
from punctual.errors import ConcurrentModification
from punctual.model import Run
from punctual.port import RunChange

_EXPIRED = (
    f"SELECT doc FROM runs INDEXED BY runs_accepted WHERE {ACCEPTED_RUN_SQL}"
    " AND deadline_at < ? ORDER BY deadline_at LIMIT ?"
)


class EmbeddedCallbacks:
    """Callback writes and timed-out acceptances on the store's SQLite file."""

    _db: Database

    def callback_beat(self, seen: Run, now: int, until: int | None, progress: str | None) -> Run:
        with self._db.write() as conn:
            stored = load_run(conn, seen.job_id, seen.scheduled_at)
            if stored is None or stored.state is not seen.state or not rules.callback_open(stored, seen, now):
                raise _moved(seen)
            beaten = rules.beaten(stored, now, until, progress)
            save_run(conn, beaten)
        return beaten

    def callback_complete(self, seen: Run, change: RunChange) -> Run:
        with self._db.write() as conn:
            stored = load_run(conn, seen.job_id, seen.scheduled_at)
            if stored is None or not rules.callback_open(stored, seen, change.now):
                raise _moved(seen)
            done = rules.apply_change(stored, change)
            save_run(conn, done)
        return done

    def expired_acceptances(self, now: int, limit: int) -> list[Run] | None:
        rows = self._db.connection().execute(_EXPIRED, (now, max(0, limit))).fetchall()
        return [Run.model_validate_json(row[0]) for row in rows]


def _moved(seen: Run) -> ConcurrentModification:
    return ConcurrentModification(f"run {seen.run_id} changed since it was read", field="run_id")
