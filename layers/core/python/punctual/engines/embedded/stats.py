"""``Store.run_stats`` on SQLite: one aggregate query over the ``runs_done`` index (schema v3).

The database does the counting: the query walks the owner's terminal runs in the window through
the index and returns one row per (minute, state, lateness bucket) with its count, so a window of
a hundred thousand runs comes back as a few hundred rows.
"""

from __future__ import annotations

import sqlite3

from punctual.engines.embedded.schema import RUN_COUNTED_AT_SQL, TERMINAL_STATES_SQL
from punctual.model import RunState
from punctual.runs.stats import LATENESS_BOUNDS_MS, MINUTE_MS, RunStats

_LATENESS = "json_extract(doc, '$.started_at') - scheduled_at"
# bucket i holds lateness <= LATENESS_BOUNDS_MS[i] (negative counts as 0), as runs.stats.lateness_bucket
_BUCKET = (
    "CASE WHEN json_extract(doc, '$.started_at') IS NULL THEN NULL "
    + " ".join(f"WHEN {_LATENESS} <= {bound} THEN {i}" for i, bound in enumerate(LATENESS_BOUNDS_MS))
    + f" ELSE {len(LATENESS_BOUNDS_MS)} END"
)
_AGGREGATE = (
    f"SELECT {RUN_COUNTED_AT_SQL} - {RUN_COUNTED_AT_SQL} % {MINUTE_MS} AS minute, state, {_BUCKET} AS bucket,"
    f" count(*) FROM runs INDEXED BY runs_done WHERE owner = ? AND state IN {TERMINAL_STATES_SQL}"
    f" AND {RUN_COUNTED_AT_SQL} >= ? AND {RUN_COUNTED_AT_SQL} < ? GROUP BY minute, state, bucket"
)
_STATES = {state.value: state for state in RunState}


def run_stats(conn: sqlite3.Connection, owner: str, since: int, until: int) -> RunStats:
    stats = RunStats(since=since, until=until)
    for minute, state, bucket, count in conn.execute(_AGGREGATE, (owner, since, until)):
        stats.add(int(minute), _STATES[state], None if bucket is None else int(bucket), int(count))
    return stats
