"""``Store.run_stats`` on DynamoDB: counters the engine adds to when a run turns terminal.

DynamoDB cannot aggregate, and the runs table has no owner index (one would cost write units on
every run), so the engine keeps the figures as it goes: when a run turns terminal, one
``UpdateItem ... ADD`` on a small counter item in the ``leases`` table::

    pk = "stats#<owner>#<k>"   sk = "<minute epoch ms, 13 digits>"  (k = shard of the run id, 0..STATS_SHARDS-1)
    n_<state> += 1, lat_<bucket> += 1 (if the run started), expires_ttl = the minute + STATS_TTL_S

The sharding spreads one owner's busy minute over ``STATS_SHARDS`` items (each item takes at
most 1,000 writes/s). Reading a window is one Query per shard over the minutes' range (sort key
``BETWEEN``): minutes without runs have no item and cost nothing, so a week (10,080 minutes) is
read in 8 Queries of at most 10,080 small items each, where one key per minute and shard (the
layout before issue 31: ``pk = stats#<owner>#<minute>``, ``sk = <k>``) took 807 BatchGetItem
requests. Counters written in that older layout are not read (they expire within 8 days).
Price: one more write unit per run (see docs/decisions/0049); a deployment may drop the
counters (``Settings.stats_counters``, ``-c stats_counters=false``): the store then never calls
:func:`tally` and answers ``run_stats`` with None (issue 14).

The counters are best-effort: they are added after the run's conditional write succeeded, so a
crash in between, or a throttled counter write (logged, never raised: statistics must not fail a
run), leaves a run uncounted; nothing is ever counted twice.
"""

from __future__ import annotations

import logging
from typing import Any

from botocore.exceptions import ClientError

from punctual import ids
from punctual.engines.aws.items import Item, Key, n, s
from punctual.engines.aws.tables import Tables
from punctual.model import Run, RunState
from punctual.port import stats as rs

logger = logging.getLogger("punctual.stats")

STATS_SHARDS = 8
STATS_TTL_S = 8 * 86_400  # counters outlive the longest window read (a day) by a week
_STATES = {state.value: state for state in RunState}


def stats_key(owner: str, shard: int, minute: int) -> Key:
    """The counter item of ``owner``'s runs of id shard ``shard`` that turned terminal in ``minute``."""
    return {"pk": s(stats_pk(owner, shard)), "sk": s(_minute_sk(minute))}


def stats_pk(owner: str, shard: int) -> str:
    return f"stats#{owner}#{shard}"


def _minute_sk(minute: int) -> str:
    return f"{minute:013d}"  # fixed width: the sort key orders as text (13 digits last until 2286)


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
    key = stats_key(run.owner, ids.shard_of(run.run_id, STATS_SHARDS), minute)
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


def run_stats(tables: Tables, table: str, owner: str, since: int, until: int) -> rs.RunStats:
    """Add up the owner's counter items of the minutes in ``[since, until)``: one Query per shard,
    the shards' at once, each read to its last page (eventually consistent: a figure, not a decision)."""
    stats = rs.RunStats(since=since, until=until)
    if until <= since:
        return stats
    requests = [
        _shard_query(table, owner, shard, rs.minute_of(since), until - rs.MINUTE_MS) for shard in range(STATS_SHARDS)
    ]
    for rows in tables.each(tables.query_all, requests):
        for item in rows:
            _count(stats, item)
    return stats


def _shard_query(table: str, owner: str, shard: int, first_minute: int, last_minute: int) -> dict[str, Any]:
    return {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk AND sk BETWEEN :first AND :last",
        "ExpressionAttributeValues": {
            ":pk": s(stats_pk(owner, shard)),
            ":first": s(_minute_sk(first_minute)),
            ":last": s(_minute_sk(last_minute)),
        },
    }


def _count(stats: rs.RunStats, item: Item) -> None:
    minute = int(item["sk"]["S"])
    for name, value in item.items():
        count = int(value.get("N", 0)) if isinstance(value, dict) else 0
        if name.startswith("n_") and name[2:] in _STATES and count:
            stats.add(minute, _STATES[name[2:]], None, count)
        elif name.startswith("lat_") and name[4:].isdigit() and int(name[4:]) < rs.BUCKETS:
            stats.lateness[int(name[4:])] += count
