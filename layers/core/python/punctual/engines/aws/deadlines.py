"""The ``aws`` engine's reads of open runs: the reaper's (open runs past their deadline, from the
sparse ``open`` index, or by sweeping the runs table when a deployment goes without that index),
and an owner's due open runs counted for ``GET /stats``.

A mixin of :class:`~punctual.engines.aws.store.DynamoStore` (``past_deadline_runs``,
``purge_expired`` and ``open_runs`` of the port; without the open index, the sweep's open runs for
``stale_open_runs``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from punctual.engines.aws import items as it
from punctual.engines.aws.items import Item, Key, n, s
from punctual.engines.aws.tables import Tables
from punctual.engines.aws.windows import DynamoWindows, is_marker, marked
from punctual.model import Run, RunState
from punctual.port.stats import OpenRuns

_OPEN_PAGE = 500  # keys per Query of the open index (KEYS_ONLY rows are tiny)
# Scan pages (<= 1 MB each) per reaper pass without the open index: 8 MB a minute sweeps ~11 GB
# a day; punctual capacity --no-open-index sizes it for a table (Settings.sweep_pages).
SWEEP_PAGES = 8
OWNER_JOBS_READ = 10_000  # an owner's job ids read for open_runs at most (index rows of ~100 bytes)
INDEX_ROWS_PER_RUN = 10  # open_runs reads at most this many open-index rows per run it may count
SWEPT_KEPT = 5_000  # keys of old open runs a sweep keeps for the deadline watch (10 ticks of its reads)


class DeadlineReads(DynamoWindows):
    """The reaper's reads of :class:`~punctual.engines.aws.store.DynamoStore`."""

    _tables: Tables
    runs_table: str
    jobs_table: str
    open_shards: int
    open_index: bool
    sweep_pages: int
    _reap_start: int  # rotates the first open shard past_deadline_runs reads (fairness)
    _sweep_from: Key | None  # where the next sweep of the runs table continues
    _swept_open: dict[tuple[str, int], None] | None = None  # old open runs the sweep saw (set on first use)

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
                runs = self._runs_and_markers(keys, scheduled_before, now)
                found.extend(r for r in runs if r.is_open and r.deadline_at < now)
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

        The same pages give the deadline alerts their open runs (there is no index to read them
        from): every open run scheduled before ``scheduled_before`` is kept, by key, for
        :meth:`swept_open_runs` (a Scan is billed by what it reads, not by what its filter returns,
        so this costs no read unit more). A run is seen once per sweep of the table.
        """
        request: dict[str, Any] = {
            "TableName": self.runs_table,
            "FilterExpression": "#state IN (:scheduled, :running, :retrying, :accepted) AND scheduled_at <= :before",
            "ExpressionAttributeNames": {"#state": "state"},
            "ExpressionAttributeValues": {
                ":scheduled": s(RunState.SCHEDULED.value),
                ":running": s(RunState.RUNNING.value),
                ":retrying": s(RunState.RETRYING.value),
                ":accepted": s(RunState.ACCEPTED.value),
                ":before": n(scheduled_before),
            },
            "ProjectionExpression": "job_id, scheduled_at, deadline_at",
        }
        keys: list[Key] = []
        for _ in range(self.sweep_pages):
            if self._sweep_from is not None:
                request["ExclusiveStartKey"] = self._sweep_from
            page = self._tables.client.scan(**request)
            for item in page.get("Items", []):
                self._keep_swept(item["job_id"]["S"], int(item["scheduled_at"]["N"]))
                if int(item["deadline_at"]["N"]) < now:
                    keys.append(it.run_position(item))
            self._sweep_from = page.get("LastEvaluatedKey")
            if self._sweep_from is None or len(keys) >= limit:
                break  # wrapped around (the next call starts at the beginning), or enough found
        found = [r for r in self._get_runs(keys[:limit]) if r.is_open and r.deadline_at < now] if keys else []
        found.sort(key=lambda r: (r.deadline_at, r.scheduled_at, r.job_id))
        return found

    def swept_open_runs(self, scheduled_before: int, limit: int) -> list[tuple[str, int]]:
        """Without the open index: the keys of open runs the sweep found scheduled before
        ``scheduled_before`` (oldest first, at most ``limit``), each handed out once (the deadline
        watch of this reaper reads them after its passes; a new reaper starts empty)."""
        kept = self._swept_open or {}
        taken = sorted((key for key in kept if key[1] <= scheduled_before), key=lambda key: key[1])[: max(0, limit)]
        for key in taken:
            del kept[key]
        return taken

    def _keep_swept(self, job_id: str, scheduled_at: int) -> None:
        if self._swept_open is None:
            self._swept_open = {}
        if len(self._swept_open) < SWEPT_KEPT:  # the rest is found again on the next sweep of the table
            self._swept_open[(job_id, scheduled_at)] = None

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

    def _runs_and_markers(self, keys: list[Key], scheduled_before: int, now: int) -> list[Run]:
        """The runs of ``keys`` (open index rows): the runs themselves, and the runs of the window
        markers among them whose last time is at or before ``scheduled_before`` (a younger window
        waits: its key says so); those markers are closed when all their runs have ended."""
        old = [k for k in keys if not is_marker(k["job_id"]["S"]) or marked(_pair(k))[1] <= scheduled_before]
        markers = self._marker_runs(old, before=scheduled_before)
        wanted = [k for k in old if not is_marker(k["job_id"]["S"])] + [k for ks in markers.values() for k in ks]
        runs = {(r.job_id, r.scheduled_at): r for r in self._get_runs(wanted)} if wanted else {}
        if markers:
            self._close_markers(markers, runs, now)
        return list(runs.values())

    def open_runs(self, owner: str, now: int, at_most: int) -> OpenRuns | None:
        """The runs table has no owner index (it would cost write units on every run), so: the
        owner's job ids from the jobs ``by_owner`` index, then the due rows of the ``open`` index
        (keys only: the job id and time), of every owner, shard by shard at once; the owner's are
        then read (eventually consistent: a figure for a page) for their state.

        Reads at most ``INDEX_ROWS_PER_RUN * at_most`` index rows, ``at_most`` runs and
        :data:`OWNER_JOBS_READ` job ids; past any bound the counts are lower bounds
        (``complete=False``). None without the open index: sweeping the runs table is the reaper's.
        """
        if not self.open_index:
            return None
        jobs, complete = self._owner_job_ids(owner)
        if not jobs:
            return OpenRuns(waiting=0, executing=0, complete=complete)
        per_shard = max(1, INDEX_ROWS_PER_RUN * at_most // self.open_shards)
        keys: list[Key] = []
        for rows, whole in self._tables.each(
            lambda shard: self._due_open_rows(shard, now, per_shard), range(self.open_shards)
        ):
            keys += [key for key in rows if _job_of(key) in jobs]
            complete = complete and whole
        markers = self._marker_runs(keys, before=now, consistent=False)  # a window's runs due by now
        keys = [key for key in keys if not is_marker(key["job_id"]["S"])] + [k for ks in markers.values() for k in ks]
        if len(keys) > at_most:
            keys, complete = keys[:at_most], False
        states = [r.get("state", {}).get("S") for r in self._tables.batch_get(self.runs_table, keys, consistent=False)]
        running = states.count(RunState.RUNNING.value) + states.count(RunState.ACCEPTED.value)
        waiting = sum(1 for state in states if state in (RunState.SCHEDULED.value, RunState.RETRYING.value))
        return OpenRuns(waiting=waiting, executing=running, complete=complete)

    def _owner_job_ids(self, owner: str) -> tuple[set[str], bool]:
        request: dict[str, Any] = {
            "TableName": self.jobs_table,
            "IndexName": "by_owner",
            "KeyConditionExpression": "#owner = :owner",
            "ExpressionAttributeNames": {"#owner": "owner"},
            "ExpressionAttributeValues": {":owner": s(owner)},
            "ProjectionExpression": "job_id",
        }
        ids, whole = self._read_rows(request, OWNER_JOBS_READ)
        return {row["job_id"]["S"] for row in ids}, whole

    def _due_open_rows(self, shard: int, now: int, at_most: int) -> tuple[list[Key], bool]:
        request: dict[str, Any] = {
            "TableName": self.runs_table,
            "IndexName": "open",
            "KeyConditionExpression": "open_shard = :shard AND scheduled_at <= :now",
            "ExpressionAttributeValues": {":shard": n(shard), ":now": n(now)},
        }
        rows, whole = self._read_rows(request, at_most)
        return [it.run_position(row) for row in rows], whole

    def _read_rows(self, request: dict[str, Any], at_most: int) -> tuple[list[Item], bool]:
        """Query pages until ``at_most`` rows; whether that was every row."""
        rows: list[Item] = []
        while True:
            page = self._tables.client.query(**request, Limit=min(1_000, at_most - len(rows) + 1))
            rows += page.get("Items", [])
            if len(rows) > at_most:
                return rows[:at_most], False
            if "LastEvaluatedKey" not in page:
                return rows, True
            request = {**request, "ExclusiveStartKey": page["LastEvaluatedKey"]}

    def purge_expired(self, now: int, deleted_before: int, limit: int) -> int:
        # DynamoDB TTL deletes expired runs (expires_at) and deleted jobs (expires_at set on delete)
        # for free, without consuming write capacity.
        return 0


def _pair(key: Key) -> tuple[str, int]:
    return key["job_id"]["S"], int(key["scheduled_at"]["N"])


def _job_of(key: Key) -> str:
    job_id: str = key["job_id"]["S"]
    return marked(_pair(key))[0] if is_marker(job_id) else job_id
