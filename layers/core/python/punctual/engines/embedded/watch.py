"""The embedded engine's reads for deadline alerts (``punctual.port.watch``): old open runs (the
partial index ``runs_open`` holds only open runs: the read is bounded by the runs in flight) and
old due jobs (the partial index ``jobs_due``, one shard at a time as a claim reads it: never every
active job).
A mixin of :class:`~punctual.engines.embedded.store.EmbeddedStore`."""

from __future__ import annotations

from punctual.engines.embedded.db import Database
from punctual.engines.embedded.schema import OPEN_RUN_SQL

_OPEN = (
    f"SELECT job_id, scheduled_at FROM runs WHERE {OPEN_RUN_SQL} AND scheduled_at <= ? ORDER BY scheduled_at LIMIT ?"
)
# per due shard, as claims read: the partial index jobs_due (due_shard, next_run_at, ...) answers it
_DUE = (
    "SELECT job_id, next_run_at FROM jobs INDEXED BY jobs_due"
    " WHERE due_shard = ? AND next_run_at <= ? AND status = 'active' ORDER BY next_run_at LIMIT ?"
)


class EmbeddedWatch:
    """Old open runs and old due jobs, from the store's SQLite file."""

    _db: Database
    shards: int

    def stale_open_runs(self, scheduled_before: int, limit: int) -> list[tuple[str, int]]:
        rows = self._db.connection().execute(_OPEN, (scheduled_before, max(0, limit))).fetchall()
        return [(str(row[0]), int(row[1])) for row in rows]

    def stale_due_jobs(self, due_before: int, limit: int) -> list[tuple[str, int]]:
        conn, found = self._db.connection(), list[tuple[str, int]]()
        for shard in range(self.shards):
            rows = conn.execute(_DUE, (shard, due_before, max(0, limit))).fetchall()
            found.extend((str(row[0]), int(row[1])) for row in rows)
        found.sort(key=lambda key: key[1])
        return found[: max(0, limit)]
