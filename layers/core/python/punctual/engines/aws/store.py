"""The ``aws`` engine's :class:`~punctual.port.Store`: DynamoDB, one conditional write per rule.

Division of labour (as in the Powertools idempotency layer): :mod:`punctual.rules` owns the rules,
:mod:`.conditions` spells them as condition expressions, :mod:`.updates` builds the lifecycle's
update requests from them, :mod:`.items` owns the item layout and cursors, :mod:`.tables` does the
paging, batches and conditional-write plumbing, and this module maps each port method to those
requests. Every ``ConditionalCheckFailedException`` becomes the outcome the port
documents (False, None, a :class:`LeaseOutcome`, or the named exception); every other
``ClientError`` propagates unchanged. Conditional writes that fail ask DynamoDB for the item as it
was (``ReturnValuesOnConditionCheckFailure=ALL_OLD``), so deciding *why* costs no extra read.

Write units of one run's happy path (items under 1 KB; see tests/integration/test_aws_engine.py
and punctual.capacity.counts): advance the job (table 1, ``due`` key move 2), insert the run
(table 1, ``open`` put 1), lease (1), finish (table 1, ``open`` delete 1, the stats counter 1).
``open_index=False`` drops the two ``open`` units and ``stats_counters=False`` the counter: 6.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import Any

from punctual import ids, rules
from punctual.engines.aws import conditions as c
from punctual.engines.aws import items as it
from punctual.engines.aws import overlap as ov
from punctual.engines.aws import stats
from punctual.engines.aws import updates as u
from punctual.engines.aws.dependencies import DependencyItems
from punctual.engines.aws.items import Item, Key, n, s
from punctual.engines.aws.tables import Tables, Written
from punctual.engines.aws.tenants import DynamoTenants
from punctual.errors import (
    ConcurrentModification,
    JobAlreadyExists,
    JobNotFound,
    LeaseLost,
    RunNotFound,
)
from punctual.model import Job, JobStatus, Overlap, Run, RunState
from punctual.port import (
    Advance,
    Alert,
    Beat,
    DueJob,
    Finish,
    Hold,
    LeaseOutcome,
    LeaseRequest,
    LeaseResult,
    Page,
    RunChange,
    RunQuery,
    ShardLease,
    Store,
)
from punctual.runs.stats import RunStats

_MAX_ALERT_PAGES = 10
_LEASE_ROUNDS = 4  # fresh lease / takeover attempts before conceding that others keep winning
_OPEN_PAGE = 500  # keys per Query of the open index (KEYS_ONLY rows are tiny)
_MAX_QUERY_LIMIT = 1000
# Scan pages (<= 1 MB each) per reaper pass without the open index: 8 MB a minute sweeps ~11 GB
# a day; punctual capacity --no-open-index sizes it for a table (Settings.sweep_pages).
SWEEP_PAGES = 8


class DynamoStore(DependencyItems, DynamoTenants, Store):
    """Jobs, runs, shard leases and alerts in three DynamoDB tables (see ``punctual.resources``)."""

    def __init__(
        self,
        client: Any,
        *,
        jobs_table: str,
        runs_table: str,
        leases_table: str,
        shards: int = 16,
        open_shards: int = 16,
        open_index: bool = True,
        stats_counters: bool = True,
        sweep_pages: int = SWEEP_PAGES,
        retention_days: int = 30,
        max_workers: int = 8,
    ) -> None:
        self._tables = Tables(client, max_workers=max_workers)
        self.jobs_table = jobs_table
        self.runs_table = runs_table
        self.leases_table = leases_table
        self.shards = shards
        self.open_shards = open_shards
        self.open_index = open_index
        self.stats_counters = stats_counters
        self.sweep_pages = sweep_pages
        self.retention_days = retention_days
        self._reap_start = 0  # rotates the first open shard past_deadline_runs reads (fairness)
        self._sweep_from: Key | None = None  # where the next sweep of the runs table continues

    def close(self) -> None:
        self._tables.close()

    # -- jobs --------------------------------------------------------------------------------------

    def create_job(self, job: Job) -> None:
        item = it.job_to_item(job, retention_days=self.retention_days)
        if not self._tables.put(self.jobs_table, item, c.guarded(c.JOB_NOT_EXISTS)).applied:
            raise JobAlreadyExists(f"job {job.id} already exists", field="id")

    def get_job(self, job_id: str) -> Job:
        item = self._tables.get(self.jobs_table, it.job_key(job_id))
        if item is None:
            raise JobNotFound(f"job {job_id} not found", field="job_id")
        return it.item_to_job(item)

    def list_jobs(
        self, owner: str, *, status: JobStatus | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[Job]:
        request: dict[str, Any] = {
            "TableName": self.jobs_table,
            "IndexName": "by_owner",
            "KeyConditionExpression": "#owner = :owner",
            "ScanIndexForward": False,  # newest created_at first
        }
        values: dict[str, Any] = {":owner": s(owner)}
        if status is None:
            request["FilterExpression"] = "#status <> :deleted"  # deleted jobs only when asked for
            values[":deleted"] = s(JobStatus.DELETED.value)
        else:
            request["FilterExpression"] = "#status = :status"
            values[":status"] = s(status.value)
        request["ExpressionAttributeValues"] = values
        request["ExpressionAttributeNames"] = c.names_in(request["KeyConditionExpression"], request["FilterExpression"])
        if cursor is not None:
            request["ExclusiveStartKey"] = it.job_cursor_key(cursor, owner)
        found, after = self._tables.collect(request, limit, it.by_owner_key)
        next_cursor = None
        if after is not None:
            position = {"o": after["owner"]["S"], "c": int(after["created_at"]["N"]), "j": after["job_id"]["S"]}
            next_cursor = ids.encode_cursor("jobs", position)
        return Page(self._full_jobs(found), next_cursor)

    def _full_jobs(self, index_items: list[Item]) -> list[Job]:
        """The jobs behind ``by_owner`` index entries, in index order.

        The index projects only ``status`` (for the filter): a claim rewrites next_run_at,
        last_run_at and version on every run, and projecting those would add an index write
        to every claim (docs/decisions.md, "Write budget").
        """
        keys = [{"job_id": item["job_id"]} for item in index_items]
        by_id = {item["job_id"]["S"]: item for item in self._tables.batch_get(self.jobs_table, keys, complete=True)}
        return [it.item_to_job(by_id[key["job_id"]["S"]]) for key in keys if key["job_id"]["S"] in by_id]

    def get_jobs(self, job_ids: Collection[str]) -> dict[str, Job]:
        keys = [it.job_key(job_id) for job_id in dict.fromkeys(job_ids)]
        return {
            item["job_id"]["S"]: it.item_to_job(item)
            for item in self._tables.batch_get(self.jobs_table, keys, complete=True)
        }

    def held_runs(self, holds: Sequence[Hold]) -> list[bool]:
        keys = [it.run_key(*key) for key in dict.fromkeys((h.job_id, h.scheduled_at) for h in holds)]
        runs = {(run.job_id, run.scheduled_at): run for run in self._get_runs_complete(keys)}
        return [rules.holds_lease(runs.get((h.job_id, h.scheduled_at)), h.worker_id, h.attempt) for h in holds]

    def _get_runs_complete(self, keys: list[Key]) -> list[Run]:
        return [it.item_to_run(item) for item in self._tables.batch_get(self.runs_table, keys, complete=True)]

    def update_job(self, job: Job, expected_version: int) -> Job:
        stored = job.model_copy(update={"version": expected_version + 1})
        item = it.job_to_item(stored, retention_days=self.retention_days)
        written = self._tables.put(
            self.jobs_table,
            item,
            c.guarded(c.VERSION_MATCHES, expected_version=n(expected_version)),
            old_on_failure=True,
        )
        if not written.applied:
            if written.item is None:
                raise JobNotFound(f"job {job.id} not found", field="job_id")
            raise ConcurrentModification(
                f"job {job.id} changed since it was read (version {it.get_n(written.item, 'version')}, "
                f"expected {expected_version}); read it again and retry"
            )
        return it.item_to_job(item)

    # -- claim -------------------------------------------------------------------------------------

    def due_jobs(self, shard: int, until: int, limit: int, after: DueJob | None = None) -> list[DueJob]:
        request: dict[str, Any] = {
            "TableName": self.jobs_table,
            "IndexName": "due",
            "KeyConditionExpression": "due_shard = :shard AND next_run_at <= :until",
            "ExpressionAttributeValues": {":shard": n(shard), ":until": n(until)},
        }
        if after is not None:
            request["ExclusiveStartKey"] = it.due_key(after)
        found: list[DueJob] = []
        # Limit is exact here (no filter); loop only because one page stops at 1 MB.
        while len(found) < limit:
            page = self._tables.client.query(**request, Limit=min(limit - len(found), _MAX_QUERY_LIMIT))
            found.extend(it.item_to_due_job(item) for item in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return found

    def insert_runs(self, runs: Sequence[Run]) -> list[bool]:
        return self._tables.each(self._insert_run, runs)

    def advance_jobs(self, advances: Sequence[Advance]) -> list[bool]:
        return self._tables.each(self._advance_job, advances)

    def _insert_run(self, run: Run) -> bool:
        item = it.run_to_item(run, open_shards=self.open_shards)
        inserted = self._tables.put(self.runs_table, item, c.guarded(c.RUN_NOT_EXISTS)).applied
        if inserted and run.state.is_terminal:  # a skipped time, recorded already closed
            self._tally(run)
        return inserted

    def _advance_job(self, advance: Advance) -> bool:
        expr = c.Expression().set("last_run_at = :last", last=n(advance.last_run_at))
        expr.set("updated_at = :now", now=n(advance.now)).set("version = version + :one", one=n(1))
        if advance.next_run_at is None:
            # a one-time job was dispatched: completed, and out of the due index
            expr.set("#status = :completed", completed=s(JobStatus.COMPLETED.value)).remove("next_run_at")
        else:
            expr.set("next_run_at = :next", next=n(advance.next_run_at))
        request = expr.request(
            c.JOB_STILL_DUE, active=s(JobStatus.ACTIVE.value), old_next=n(advance.expected_next_run_at)
        )
        return self._tables.update(self.jobs_table, it.job_key(advance.job_id), request, returns="NONE").applied

    # -- runs --------------------------------------------------------------------------------------

    def get_run(self, job_id: str, scheduled_at: int) -> Run:
        item = self._tables.get(self.runs_table, it.run_key(job_id, scheduled_at))
        if item is None:
            raise RunNotFound(f"run {ids.run_id_for(job_id, scheduled_at)} not found", field="run_id")
        return it.item_to_run(item)

    def list_runs(self, job_id: str, query: RunQuery) -> Page[Run]:
        if query.since is not None and query.until is not None and query.since > query.until:
            return Page([])  # an empty range; DynamoDB rejects BETWEEN with low > high
        key_condition = "job_id = :job"
        values: dict[str, Any] = {":job": s(job_id)}
        if query.since is not None and query.until is not None:
            key_condition += " AND scheduled_at BETWEEN :since AND :until"
        elif query.since is not None:
            key_condition += " AND scheduled_at >= :since"
        elif query.until is not None:
            key_condition += " AND scheduled_at <= :until"
        if query.since is not None:
            values[":since"] = n(query.since)
        if query.until is not None:
            values[":until"] = n(query.until)
        request: dict[str, Any] = {
            "TableName": self.runs_table,
            "KeyConditionExpression": key_condition,
            "ScanIndexForward": False,  # newest scheduled_at first
        }
        if query.states:
            placeholders = [f":state{i}" for i in range(len(query.states))]
            request["FilterExpression"] = f"#state IN ({', '.join(placeholders)})"
            request["ExpressionAttributeNames"] = c.names_in(request["FilterExpression"])
            values.update(zip(placeholders, (s(state.value) for state in sorted(query.states)), strict=True))
        request["ExpressionAttributeValues"] = values
        if query.cursor is not None:
            request["ExclusiveStartKey"] = it.run_cursor_key(query.cursor, job_id)
        found, after = self._tables.collect(request, query.limit, it.run_position)
        next_cursor = None
        if after is not None:
            next_cursor = ids.encode_cursor("runs", {"j": job_id, "s": int(after["scheduled_at"]["N"])})
        return Page([it.item_to_run(item) for item in found], next_cursor)

    def lease_run(
        self,
        job_id: str,
        scheduled_at: int,
        worker_id: str,
        now: int,
        lease_ms: int,
        *,
        overlap: Overlap = Overlap.ALLOW,
        starts_at: int | None = None,
    ) -> LeaseResult:
        """One conditional write in the common case (scheduled, or retrying past its backoff).

        A job with overlap forbid or replace first reads the run and its predecessors
        (``engines.aws.overlap``): the policy is decided here, at the run's first lease.

        If that fails, the run as it was decides (``rules.lease_outcome``). A running run whose lease
        expired is taken over by a second, compare-and-set write on the attempt and lease end that
        were seen, which also appends the lost attempt to the log. Losing that race re-evaluates the
        run as the failed write found it, a bounded number of times.
        """
        if overlap is not Overlap.ALLOW:
            skipped = ov.decide(
                self._tables,
                self.runs_table,
                job_id,
                scheduled_at,
                overlap=overlap,
                now=now,
                transition=self.transition_run,
                reread=self.get_run,
            )
            if skipped is not None:
                return skipped
        key = it.run_key(job_id, scheduled_at)
        start = max(now, starts_at or now)  # a pre-lease's attempt starts at the run's instant
        until = start + lease_ms
        seen: Run | None = None
        for _ in range(_LEASE_ROUNDS):
            if seen is not None and rules.is_takeover(seen):
                request = u.takeover_request(seen, worker_id, now, until, start)
            else:
                request = u.lease_request(worker_id, now, until, start)
            written = self._tables.update(self.runs_table, key, request)
            found = None if written.item is None else it.item_to_run(written.item)
            if written.applied:
                return LeaseResult(LeaseOutcome.LEASED, found)
            outcome = rules.lease_outcome(found, now)
            if outcome is not LeaseOutcome.LEASED:
                return LeaseResult(outcome, found)
            seen = found
        return LeaseResult(LeaseOutcome.HELD, seen)  # others kept winning: treat it as held

    def heartbeat_run(self, job_id: str, scheduled_at: int, worker_id: str, attempt: int, lease_expires_at: int) -> Run:
        expr = c.Expression().set("lease_expires_at = :until, deadline_at = :until", until=n(lease_expires_at))
        return self._while_held(job_id, scheduled_at, worker_id, attempt, expr)

    def finish_run(self, job_id: str, scheduled_at: int, worker_id: str, attempt: int, change: RunChange) -> Run:
        rules.check_transition(RunState.RUNNING, change.state)  # only a held (running) run finishes
        expr = u.change_expression(change, retention_days=self.retention_days)
        finished = self._while_held(job_id, scheduled_at, worker_id, attempt, expr)
        if finished.state.is_terminal:
            self._tally(finished)
        return finished

    # Batches: concurrent conditional writes (a transaction would double the write units and
    # fail the whole batch on one lost race); each item is decided exactly as a single call.

    def lease_runs(self, requests: Sequence[LeaseRequest], worker_id: str, now: int) -> list[LeaseResult]:
        def one(r: LeaseRequest) -> LeaseResult:
            return self.lease_run(
                r.job_id, r.scheduled_at, worker_id, now, r.lease_ms, overlap=r.overlap, starts_at=r.starts_at
            )

        return self._tables.each(one, requests)

    def heartbeat_runs(self, beats: Sequence[Beat]) -> list[bool]:
        def one(beat: Beat) -> bool:
            h = beat.hold
            try:
                self.heartbeat_run(h.job_id, h.scheduled_at, h.worker_id, h.attempt, beat.lease_expires_at)
            except LeaseLost:
                return False
            return True

        return self._tables.each(one, beats)

    def finish_runs(self, finishes: Sequence[Finish]) -> list[Run | None]:
        def one(finish: Finish) -> Run | None:
            h = finish.hold
            try:
                return self.finish_run(h.job_id, h.scheduled_at, h.worker_id, h.attempt, finish.change)
            except LeaseLost:
                return None

        return self._tables.each(one, finishes)

    def _while_held(self, job_id: str, scheduled_at: int, worker_id: str, attempt: int, expr: c.Expression) -> Run:
        """Apply ``expr`` iff ``worker_id`` still holds ``attempt`` (LEASE_HELD); else :class:`LeaseLost`."""
        held = {"running": s(RunState.RUNNING.value), "worker": s(worker_id), "held_attempt": n(attempt)}
        request = expr.request(c.LEASE_HELD, **held)
        written = self._tables.update(self.runs_table, it.run_key(job_id, scheduled_at), request, old_on_failure=False)
        if not written.applied:
            run_id = ids.run_id_for(job_id, scheduled_at)
            raise LeaseLost(f"worker {worker_id} no longer holds attempt {attempt} of run {run_id}")
        return _run_of(written)

    def transition_run(self, current: Run, change: RunChange) -> Run:
        # terminal runs have no transition, so a run never re-enters the open index
        rules.check_transition(current.state, change.state)
        values: dict[str, Any] = {"read_state": s(current.state.value), "read_attempt": n(current.attempt)}
        if current.lease_expires_at is not None:
            values["read_lease"] = n(current.lease_expires_at)
        condition = c.unchanged_since(current.lease_expires_at is not None)
        request = u.change_expression(change, retention_days=self.retention_days).request(condition, **values)
        key = it.run_key(current.job_id, current.scheduled_at)
        written = self._tables.update(self.runs_table, key, request, old_on_failure=False)
        if not written.applied:
            raise ConcurrentModification(f"run {current.run_id} changed since it was read")
        changed = _run_of(written)
        if changed.state.is_terminal and not current.state.is_terminal:
            self._tally(changed)
        return changed

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

    # -- stats ------------------------------------------------------------------------------------

    def run_stats(self, owner: str, since: int, until: int) -> RunStats | None:
        if not self.stats_counters:
            return None  # nothing was counted: "unavailable", not "zero runs"
        return stats.run_stats(lambda keys: self._tables.batch_get(self.leases_table, keys), owner, since, until)

    def _tally(self, run: Run) -> None:
        """Count a run that just turned terminal in the owner's GET /stats counters (1 write unit)."""
        if self.stats_counters:
            stats.tally(self._tables.client, self.leases_table, run)

    # -- shard leases ------------------------------------------------------------------------------

    def acquire_shard(self, shard: int, owner: str, now: int, ttl_ms: int) -> ShardLease | None:
        key = it.shard_key(shard)
        until = now + ttl_ms
        extend = c.Expression().set("expires_at = :until", until=n(until))
        written = self._tables.update(
            self.leases_table, key, extend.request(c.SHARD_OURS_LIVE, me=s(owner), now=n(now))
        )
        if written.applied:
            return _lease_of(written)
        current = None if written.item is None else it.item_to_lease(written.item)
        if not rules.may_acquire_shard(current, owner, now):
            return None  # another owner's live lease: no second write
        take = c.Expression().set("#owner = :me", me=s(owner)).set("expires_at = :until", until=n(until))
        take.set("epoch = if_not_exists(epoch, :zero) + :one", zero=n(0), one=n(1))  # a new fencing token
        written = self._tables.update(
            self.leases_table, key, take.request(c.SHARD_FREE, now=n(now)), old_on_failure=False
        )
        return _lease_of(written) if written.applied else None

    def renew_shard(self, lease: ShardLease, now: int, ttl_ms: int) -> ShardLease | None:
        expr = c.Expression().set("expires_at = :until", until=n(now + ttl_ms))
        request = expr.request(c.SHARD_HELD, me=s(lease.owner), epoch=n(lease.epoch))
        written = self._tables.update(self.leases_table, it.shard_key(lease.shard), request, old_on_failure=False)
        return _lease_of(written) if written.applied else None

    def release_shard(self, lease: ShardLease) -> None:
        expr = c.Expression().set("expires_at = :zero", zero=n(0))
        request = expr.request(c.SHARD_HELD, me=s(lease.owner), epoch=n(lease.epoch))
        self._tables.update(self.leases_table, it.shard_key(lease.shard), request, returns="NONE", old_on_failure=False)

    def shard_leases(self) -> list[ShardLease]:
        request: dict[str, Any] = {
            "TableName": self.leases_table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": s(it.SHARD_PK)},
            "ConsistentRead": True,
        }
        leases = [it.item_to_lease(item) for item in self._tables.query_all(request)]
        return sorted(leases, key=lambda lease: lease.shard)

    # -- alerts ------------------------------------------------------------------------------------

    def record_alert(self, alert: Alert) -> bool:
        item = it.alert_to_item(alert, retention_days=self.retention_days)
        return self._tables.put(self.leases_table, item, c.guarded(c.ALERT_NOT_EXISTS)).applied

    def list_alerts(self, owner: str, limit: int = 50) -> list[Alert]:
        request: dict[str, Any] = {
            "TableName": self.leases_table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": s(it.alert_pk(owner))},
        }
        # keyed by run id (one alert per run), so newest-first is a sort here; bounded pages
        alerts = [it.item_to_alert(item) for item in self._tables.query_all(request, max_pages=_MAX_ALERT_PAGES)]
        alerts.sort(key=lambda a: (a.created_at, a.run_id), reverse=True)
        return alerts[:limit]


# -- small helpers ---------------------------------------------------------------------------------


def _run_of(written: Written) -> Run:
    assert written.item is not None  # ALL_NEW of an applied update
    return it.item_to_run(written.item)


def _lease_of(written: Written) -> ShardLease:
    assert written.item is not None  # ALL_NEW of an applied update
    return it.item_to_lease(written.item)
