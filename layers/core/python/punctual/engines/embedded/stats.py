"""``Store.run_stats`` on SQLite: one aggregate query over the ``runs_stats`` index (schema v4);
``Store.open_runs``: one count over the ``runs_open`` index. A mixin of the embedded store.

The database does the counting: the query walks the owner's terminal runs in the window through
the index, which holds every value it needs (the time counted at, the state, the start lateness),
and returns one row per (minute, state, lateness bucket) with its count, so a window of a hundred
thousand runs comes back as a few hundred rows without reading a run.
"""

from __future__ import annotations

import sqlite3

from punctual.engines.embedded.db import Database
from punctual.engines.embedded.schema import OPEN_RUN_SQL, RUN_COUNTED_AT_SQL, RUN_LATENESS_SQL, TERMINAL_RUN_SQL
from punctual.model import RunState
from punctual.port.stats import LATENESS_BOUNDS_MS, MINUTE_MS, OpenRuns, RunStats

# The CTE selects the indexed expressions verbatim (so they are read from the index) and is
# MATERIALIZED: flattened, SQLite would evaluate the lateness again in every WHEN of the CASE.
_BUCKET = (
    "CASE WHEN late IS NULL THEN NULL "
    + " ".join(f"WHEN late <= {bound} THEN {i}" for i, bound in enumerate(LATENESS_BOUNDS_MS))
    + f" ELSE {len(LATENESS_BOUNDS_MS)} END"
)
_AGGREGATE = (
    "WITH done AS MATERIALIZED ("
    f" SELECT {RUN_COUNTED_AT_SQL} AS counted, state, {RUN_LATENESS_SQL} AS late"
    f" FROM runs INDEXED BY runs_stats WHERE owner = ? AND {TERMINAL_RUN_SQL}"
    f" AND {RUN_COUNTED_AT_SQL} >= ? AND {RUN_COUNTED_AT_SQL} < ?)"
    f" SELECT counted - counted % {MINUTE_MS} AS minute, state, {_BUCKET} AS bucket, count(*)"
    " FROM done GROUP BY minute, state, bucket"
)
_STATES = {state.value: state for state in RunState}


def run_stats(conn: sqlite3.Connection, owner: str, since: int, until: int) -> RunStats:
    stats = RunStats(since=since, until=until)
    for minute, state, bucket, count in conn.execute(_AGGREGATE, (owner, since, until)):
        stats.add(int(minute), _STATES[state], None if bucket is None else int(bucket), int(count))
    return stats


# Every open run is in the partial index runs_open (deadline_at, scheduled_at), and open runs are
# few (the due and the executing: runs are created a lookahead ahead), so the owner's are found by
# reading that index rather than by keeping another one on every run's write.
_OPEN = (
    f"SELECT state, count(*) FROM runs INDEXED BY runs_open WHERE {OPEN_RUN_SQL}"
    " AND owner = ? AND scheduled_at <= ? GROUP BY state"
)


def open_runs(conn: sqlite3.Connection, owner: str, now: int) -> OpenRuns:
    counts = {state: int(count) for state, count in conn.execute(_OPEN, (owner, now))}
    executing = counts.pop(RunState.RUNNING.value, 0) + counts.pop(RunState.ACCEPTED.value, 0)
    return OpenRuns(waiting=sum(counts.values()), executing=executing)


class EmbeddedStats:
    """The figures of ``GET /stats`` (:class:`~punctual.engines.embedded.store.EmbeddedStore`'s)."""

    _db: Database

    def run_stats(self, owner: str, since: int, until: int) -> RunStats:
        return run_stats(self._db.connection(), owner, since, until)

    def open_runs(self, owner: str, now: int, at_most: int) -> OpenRuns:
        return open_runs(self._db.connection(), owner, now)  # exact: one count over an index
