"""The ``aws`` engine's reaper reads: open runs past their deadline, from the sparse ``open``
index, or by sweeping the runs table when a deployment goes without that index.

A mixin of :class:`~punctual.engines.aws.store.DynamoStore` (``past_deadline_runs`` and
``purge_expired`` of the port).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from punctual.engines.aws import items as it
from punctual.engines.aws.items import Key, n, s
from punctual.engines.aws.tables import Tables
from punctual.model import Run, RunState

_OPEN_PAGE = 500  # keys per Query of the open index (KEYS_ONLY rows are tiny)
# Scan pages (<= 1 MB each) per reaper pass without the open index: 8 MB a minute sweeps ~11 GB
# a day; punctual capacity --no-open-index sizes it for a table (Settings.sweep_pages).
SWEEP_PAGES = 8


class DeadlineReads:
    """The reaper's reads of :class:`~punctual.engines.aws.store.DynamoStore`."""

    _tables: Tables
    runs_table: str
    open_shards: int
    open_index: bool
    sweep_pages: int
    _reap_start: int  # rotates the first open shard past_deadline_runs reads (fairness)
    _sweep_from: Key | None  # where the next sweep of the runs table continues

    def past_deadline_runs(self, now: int, scheduled_before: int, limit: int) -> list[Run]:
        """Reads the sparse ``open`` index shard by shard (keys only), then the runs themselves
        with consistent reads: the index is eventually consistent and carries no deadline.

        Stops reading once ``limit`` runs qualify, starting each call at the next shard so that no
        shard waits behind another's backlog; the result is sorted most overdue first.
        Without the index (``open_index=False``) it sweeps the runs table instead (:meth:`_sweep`).
        """
        if not self.open_index:
            return self._sweep(now, scheduled_before, limit)
        found: list[Run] = []
        start, self._reap_start = self._reap_start, (self._reap_start + 1) % self.open_shards
        for offset in range(self.open_shards):
            shard = (start + offset) % self.open_shards
            for keys in self._open_keys(shard, scheduled_before):
                found.extend(r for r in self._get_runs(keys) if r.is_open and r.deadline_at < now)
                if len(found) >= limit:
                    break
            if len(found) >= limit:
                break
        found.sort(key=lambda r: (r.deadline_at, r.scheduled_at, r.job_id))  # most overdue first
        return found[:limit]

    def _sweep(self, now: int, scheduled_before: int, limit: int) -> list[Run]:
        """Scan at most ``sweep_pages`` pages of the runs table for open runs past their deadline.

        Each call continues where the previous one stopped and wraps around at the end, so repeated
        reaper passes sweep the whole table; a full sweep costs the table's size in eventually
        consistent read units (docs/capacity.md sizes the pages per pass for a sweep period). The
        runs found are read again with consistent reads, as from the index.
        """
        request: dict[str, Any] = {
            "TableName": self.runs_table,
            "FilterExpression": "#state IN (:scheduled, :running, :retrying) AND scheduled_at <= :before"
            " AND deadline_at < :now",
            "ExpressionAttributeNames": {"#state": "state"},
            "ExpressionAttributeValues": {
                ":scheduled": s(RunState.SCHEDULED.value),
                ":running": s(RunState.RUNNING.value),
                ":retrying": s(RunState.RETRYING.value),
                ":before": n(scheduled_before),
                ":now": n(now),
            },
            "ProjectionExpression": "job_id, scheduled_at",
        }
        keys: list[Key] = []
        for _ in range(self.sweep_pages):
            if self._sweep_from is not None:
                request["ExclusiveStartKey"] = self._sweep_from
            page = self._tables.client.scan(**request)
            keys += [it.run_position(item) for item in page.get("Items", [])]
            self._sweep_from = page.get("LastEvaluatedKey")
            if self._sweep_from is None or len(keys) >= limit:
                break  # wrapped around (the next call starts at the beginning), or enough found
        found = [r for r in self._get_runs(keys[:limit]) if r.is_open and r.deadline_at < now] if keys else []
        found.sort(key=lambda r: (r.deadline_at, r.scheduled_at, r.job_id))
        return found

    def _open_keys(self, shard: int, scheduled_before: int) -> Iterator[list[Key]]:
        request: dict[str, Any] = {
            "TableName": self.runs_table,
            "IndexName": "open",
            "KeyConditionExpression": "open_shard = :shard AND scheduled_at <= :before",
            "ExpressionAttributeValues": {":shard": n(shard), ":before": n(scheduled_before)},
            "Limit": _OPEN_PAGE,
        }
        while True:
            page = self._tables.client.query(**request)
            keys = [it.run_position(item) for item in page.get("Items", [])]
            if keys:
                yield keys
            if "LastEvaluatedKey" not in page:
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _get_runs(self, keys: list[Key]) -> list[Run]:
        return [it.item_to_run(item) for item in self._tables.batch_get(self.runs_table, keys)]

    def purge_expired(self, now: int, deleted_before: int, limit: int) -> int:
        # DynamoDB TTL deletes expired runs (expires_at) and deleted jobs (expires_at set on delete)
        # for free, without consuming write capacity.
        return 0
