"""``Store.run_stats`` on SQLite: one aggregate query over the ``runs_stats`` index (schema v4).

The database does the counting: the query walks the owner's terminal runs in the window through
the index, which holds every value it needs (the time counted at, the state, the start lateness),
and returns one row per (minute, state, lateness bucket) with its count, so a window of a hundred
thousand runs comes back as a few hundred rows without reading a run.
"""

from __future__ import annotations

import sqlite3

from punctual.engines.embedded.schema import RUN_COUNTED_AT_SQL, RUN_LATENESS_SQL, TERMINAL_RUN_SQL
from punctual.model import RunState
from punctual.port.stats import LATENESS_BOUNDS_MS, MINUTE_MS, RunStats

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
