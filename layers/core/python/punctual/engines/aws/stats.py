"""``Store.run_stats`` on DynamoDB: counters the engine adds to when a run turns terminal.

DynamoDB cannot aggregate, and the runs table has no owner index (one would cost write units on
every run), so the engine keeps the figures as it goes: when a run turns terminal, one
``UpdateItem ... ADD`` on a small counter item in the ``leases`` table::

    pk = "stats#<owner>#<minute epoch ms>"   sk = "<k>"  (k = shard of the run id, 0..STATS_SHARDS-1)
    n_<state> += 1, lat_<bucket> += 1 (if the run started), expires_ttl = the minute + STATS_TTL_S

The sharding spreads one owner's busy minute over ``STATS_SHARDS`` items (each item takes at
most 1,000 writes/s). Reading a window is ``minutes x STATS_SHARDS`` keys by BatchGetItem (60
minutes: 5 requests). Price: one more write unit per run (see docs/decisions/0049); a
deployment may drop the counters (``Settings.stats_counters``, ``-c stats_counters=false``): the
store then never calls :func:`tally` and answers ``run_stats`` with None (issue 14).

The counters are best-effort: they are added after the run's conditional write succeeded, so a
crash in between, or a throttled counter write (logged, never raised: statistics must not fail a
run), leaves a run uncounted; nothing is ever counted twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from punctual import ids
from punctual.engines.aws.items import Item, Key, n, s
from punctual.model import Run, RunState
from punctual.port import stats as rs

logger = logging.getLogger("punctual.stats")

STATS_SHARDS = 8
STATS_TTL_S = 8 * 86_400  # counters outlive the longest window read (a day) by a week
_STATES = {state.value: state for state in RunState}


def stats_pk(owner: str, minute: int) -> str:
    return f"stats#{owner}#{minute}"


def tally(client: Any, table: str, run: Run) -> None:
    """Count ``run`` (just turned terminal) in its minute's counter item. Never raises a ClientError."""
    minute = rs.minute_of(rs.counted_at(run))
    names = {"#state": f"n_{run.state.value}"}
    values: dict[str, Any] = {":one": n(1), ":ttl": n(minute // 1000 + STATS_TTL_S)}
    adds = ["#state :one"]
    lateness = rs.lateness_of(run)
    if lateness is not None:
        names["#lat"] = f"lat_{rs.lateness_bucket(lateness)}"
        adds.append("#lat :one")
    key = {"pk": s(stats_pk(run.owner, minute)), "sk": s(str(ids.shard_of(run.run_id, STATS_SHARDS)))}
    try:
        client.update_item(
            TableName=table,
            Key=key,
            UpdateExpression=f"ADD {', '.join(adds)} SET expires_ttl = :ttl",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )
    except ClientError as exc:
        logger.warning("run %s not counted in stats: %s", run.run_id, exc.response.get("Error", {}).get("Code"))


def run_stats(batch_get: Callable[[list[Key]], list[Item]], owner: str, since: int, until: int) -> rs.RunStats:
    """Add up the counter items of every minute in ``[since, until)``."""
    keys = [
        {"pk": s(stats_pk(owner, minute)), "sk": s(str(shard))}
        for minute in range(rs.minute_of(since), until, rs.MINUTE_MS)
        for shard in range(STATS_SHARDS)
    ]
    stats = rs.RunStats(since=since, until=until)
    for item in batch_get(keys):
        minute = int(item["pk"]["S"].rsplit("#", 1)[1])
        for name, value in item.items():
            count = int(value.get("N", 0)) if isinstance(value, dict) else 0
            if name.startswith("n_") and name[2:] in _STATES and count:
                stats.add(minute, _STATES[name[2:]], None, count)
            elif name.startswith("lat_") and name[4:].isdigit() and int(name[4:]) < rs.BUCKETS:
                stats.lateness[int(name[4:])] += count
    return stats
