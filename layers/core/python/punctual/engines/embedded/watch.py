"""The embedded engine's reads for deadline alerts (``punctual.port.watch``): old open runs (the
partial index ``runs_open`` covers open runs) and old due jobs (the partial index ``jobs_due``).
A mixin of :class:`~punctual.engines.embedded.store.EmbeddedStore`."""

from __future__ import annotations

from punctual.engines.embedded.db import Database
from punctual.engines.embedded.schema import OPEN_RUN_SQL

_OPEN = (
    f"SELECT job_id, scheduled_at FROM runs WHERE {OPEN_RUN_SQL} AND scheduled_at <= ? ORDER BY scheduled_at LIMIT ?"
)
_DUE = "SELECT job_id, next_run_at FROM jobs WHERE status = 'active' AND next_run_at <= ? ORDER BY next_run_at LIMIT ?"


class EmbeddedWatch:
    """Old open runs and old due jobs, from the store's SQLite file."""

    _db: Database

    def stale_open_runs(self, scheduled_before: int, limit: int) -> list[tuple[str, int]]:
        rows = self._db.connection().execute(_OPEN, (scheduled_before, max(0, limit))).fetchall()
        return [(str(row[0]), int(row[1])) for row in rows]

    def stale_due_jobs(self, due_before: int, limit: int) -> list[tuple[str, int]]:
        rows = self._db.connection().execute(_DUE, (due_before, max(0, limit))).fetchall()
        return [(str(row[0]), int(row[1])) for row in rows]
