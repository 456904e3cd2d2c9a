"""The ``aws`` engine's reads for deadline alerts (``punctual.port.watch``): keys of old open runs
from the sparse ``open`` index, and old due jobs from the sparse ``due`` index. A mixin of
:class:`~punctual.engines.aws.store.DynamoStore`.

Both are Queries of index rows older than a bound (a minute or more ago), one page per shard at
most, projecting keys only: a deployment whose scheduler keeps up and whose runs finish within a
minute reads one empty page per shard (0.5 read units each) per reaper pass, and writes nothing. A
stack without the open index hands out instead the old open runs that its reaper's sweep of the
runs table saw (``engines.aws.deadlines``): no read of its own, one sweep period late at most.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from punctual.engines.aws.items import n, s
from punctual.engines.aws.tables import Tables
from punctual.engines.aws.windows import DynamoWindows, is_marker

_MAX_PAGE = 1_000


class DynamoWatch(DynamoWindows):
    """Old open runs and old due jobs, read from the ``open`` and ``due`` indexes."""

    _tables: Tables
    runs_table: str
    jobs_table: str
    shards: int
    open_shards: int
    open_index: bool
    swept_open_runs: Callable[[int, int], list[tuple[str, int]]]  # engines.aws.deadlines (the sweep's)

    def stale_open_runs(self, scheduled_before: int, limit: int) -> list[tuple[str, int]]:
        if not self.open_index:  # without it the reaper's sweep is the only read of open runs: what it saw
            return self.swept_open_runs(scheduled_before, limit)
        keys = self._oldest(
            "open", "open_shard", "scheduled_at", self.runs_table, self.open_shards, scheduled_before, limit
        )
        if not any(is_marker(job_id) for job_id, _ in keys):
            return keys
        # a claim window's marker stands for its runs: those scheduled by then (engines.aws.windows)
        wanted = [{"job_id": s(job_id), "scheduled_at": n(at)} for job_id, at in keys if is_marker(job_id)]
        runs = self._marker_runs(wanted, before=scheduled_before, consistent=False)
        found = [key for key in keys if not is_marker(key[0])]
        found += [(key["job_id"]["S"], int(key["scheduled_at"]["N"])) for named in runs.values() for key in named]
        found.sort(key=lambda key: key[1])
        return found[: max(0, limit)]

    def stale_due_jobs(self, due_before: int, limit: int) -> list[tuple[str, int]]:
        return self._oldest("due", "due_shard", "next_run_at", self.jobs_table, self.shards, due_before, limit)

    def _oldest(  # noqa: PLR0917 - one query shape, two indexes
        self, index: str, shard_key: str, sort_key: str, table: str, shards: int, before: int, limit: int
    ) -> list[tuple[str, int]]:
        found: list[tuple[str, int]] = []
        per_shard = max(1, min(_MAX_PAGE, -(-limit // max(1, shards))))
        for shard in range(shards):
            page = self._tables.client.query(
                TableName=table,
                IndexName=index,
                KeyConditionExpression=f"{shard_key} = :shard AND {sort_key} <= :before",
                ExpressionAttributeValues={":shard": n(shard), ":before": n(before)},
                ProjectionExpression=f"job_id, {sort_key}",
                Limit=per_shard,
            )
            found.extend((row["job_id"]["S"], int(row[sort_key]["N"])) for row in _items(page))
        found.sort(key=lambda key: key[1])
        return found[: max(0, limit)]


def _items(page: dict[str, Any]) -> list[dict[str, Any]]:
    return list(page.get("Items", []))
