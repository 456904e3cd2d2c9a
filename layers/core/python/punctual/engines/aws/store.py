"""The ``aws`` engine's :class:`~punctual.port.Store`: DynamoDB, one conditional write per rule.

Division of labour (as in the Powertools idempotency layer): :mod:`punctual.rules` owns the rules,
:mod:`.conditions` spells them as condition expressions, :mod:`.updates` builds the lifecycle's
update requests from them, :mod:`.items` owns the item layout and cursors, :mod:`.tables` does the
paging, batches and conditional-write plumbing, and this module maps each port method to those
requests: the claim, runs, stats and alerts here; the runs' inserts and a claim window's marker
(:mod:`.windows`), jobs (:mod:`.jobs`), the reaper's reads (:mod:`.deadlines`), shard leases
(:mod:`.shards`), dependencies (:mod:`.dependencies`, and their decisions in :mod:`.edges`),
tenants, run outcomes (:mod:`.outcomes`), calendars (:mod:`.calendars`) and callbacks
(:mod:`.callbacks`) in mixins. Every
``ConditionalCheckFailedException`` becomes the outcome the port documents (False, None, a
:class:`LeaseOutcome`, or the named exception); every other ``ClientError`` propagates unchanged.
Conditional writes that fail ask DynamoDB for the item as it was
(``ReturnValuesOnConditionCheckFailure=ALL_OLD``), so deciding *why* costs no extra read.

Write units of one run's happy path (every item written under 1 KB, whatever the job's payload and
headers: the advance writes only the job's head, :mod:`.job_items`; see
tests/integration/test_capacity_counts.py and punctual.capacity.counts): advance the job (table 1,
``due`` key move 2), insert the run (table 1, ``open`` put 1), lease (1), finish (table 1, ``open``
delete 1, the stats counter 1). ``open_index=False`` drops the two ``open`` units and
``stats_counters=False`` the counter: 6. A claim window pays the advance once per window and its
runs' ``open`` units once, on a marker (:mod:`.windows`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import Any

from punctual import ids, rules
from punctual.engines.aws import conditions as c
from punctual.engines.aws import items as it
from punctual.engines.aws import overlap as ov
from punctual.engines.aws import stats
from punctual.engines.aws import updates as u
from punctual.engines.aws.calendars import DynamoCalendars
from punctual.engines.aws.callbacks import DynamoCallbacks
from punctual.engines.aws.deadlines import SWEEP_PAGES, DeadlineReads
from punctual.engines.aws.edges import DynamoEdges
from punctual.engines.aws.items import n, s
from punctual.engines.aws.outcomes import DynamoOutcomes
from punctual.engines.aws.reservations import DynamoReservations
from punctual.engines.aws.shards import DynamoShards
from punctual.engines.aws.tables import Tables, Written
from punctual.engines.aws.tenants import DynamoTenants
from punctual.engines.aws.watch import DynamoWatch
from punctual.errors import ConcurrentModification, LeaseLost, RunNotFound
from punctual.model import JobStatus, Overlap, Run, RunState, Withdrawal
from punctual.port import (
    Advance,
    Alert,
    Beat,
    DueJob,
    Finish,
    LeaseOutcome,
    LeaseRequest,
    LeaseResult,
    Page,
    RunChange,
    RunQuery,
    Store,
)
from punctual.port.stats import RunStats

logger = logging.getLogger(__name__)

_MAX_ALERT_PAGES = 10
_LEASE_ROUNDS = 4  # fresh lease / takeover attempts before conceding that others keep winning
_MAX_QUERY_LIMIT = 1000


class DynamoStore(
    DynamoEdges,
    DynamoReservations,
    DeadlineReads,
    DynamoShards,
    DynamoTenants,
    DynamoOutcomes,
    DynamoWatch,
    DynamoCalendars,
    DynamoCallbacks,
    Store,
):
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
        self._reap_start = 0
        self._sweep_from = None

    def close(self) -> None:
        self._tables.close()

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

    def advance_jobs(self, advances: Sequence[Advance]) -> list[bool]:
        return self._tables.each(self._advance_job, advances)

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
        # an edit in flight on the head (a transaction) refuses the advance like a changed head: counted
        key = it.job_key(advance.job_id)
        return self._tables.update(self.jobs_table, key, request, returns="NONE", conflict_refuses=True).applied

    # -- runs --------------------------------------------------------------------------------------

    def get_run(self, job_id: str, scheduled_at: int) -> Run:
        item = self._tables.get(self.runs_table, it.run_key(job_id, scheduled_at))
        if item is None:
            raise RunNotFound(f"run {ids.run_id_for(job_id, scheduled_at)} not found", field="run_id")
        return it.item_to_run(item)

    def get_runs(self, keys: Collection[tuple[str, int]]) -> dict[tuple[str, int], Run]:
        wanted = [it.run_key(*key) for key in dict.fromkeys(keys)]
        runs = (it.item_to_run(item) for item in self._tables.batch_get(self.runs_table, wanted, complete=True))
        return {(run.job_id, run.scheduled_at): run for run in runs}

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

    def lease_one(self, request: LeaseRequest, worker_id: str, now: int) -> LeaseResult:
        """One conditional write in the common case (scheduled, or retrying past its backoff).

        A run the worker says is ``withdrawn`` (its job paused, or its schedule lost the instant)
        is read first, and cancelled by compare-and-set if that applies (``rules.withdrawn``: its
        first lease, a trigger concerned): SKIPPED, never leased. A job with overlap forbid or
        replace first reads the run and its predecessors (``engines.aws.overlap``): the policy is
        decided here, at the run's first lease.

        If that fails, the run as it was decides (``rules.lease_outcome``). A running run whose lease
        expired is taken over by a second, compare-and-set write on the attempt and lease end that
        were seen, which also appends the lost attempt to the log. Losing that race re-evaluates the
        run as the failed write found it, a bounded number of times.
        """
        job_id, scheduled_at, overlap = request.job_id, request.scheduled_at, request.overlap
        if request.withdrawn is not None:
            cancelled = self._withdraw(job_id, scheduled_at, request.withdrawn, now)
            if cancelled is not None:
                return cancelled
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
        until = now + request.lease_ms
        seen: Run | None = None
        for _ in range(_LEASE_ROUNDS):
            if seen is not None and rules.is_takeover(seen):
                update = u.takeover_request(seen, worker_id, now, until)
            else:
                update = u.lease_request(worker_id, now, until)
            written = self._tables.update(self.runs_table, key, update)
            found = None if written.item is None else it.item_to_run(written.item)
            if written.applied:
                return LeaseResult(LeaseOutcome.LEASED, found)
            outcome = rules.lease_outcome(found, now, worker_id)
            if outcome is not LeaseOutcome.LEASED:
                return LeaseResult(outcome, found)
            seen = found
        return LeaseResult(LeaseOutcome.HELD, seen)  # others kept winning: treat it as held

    def _withdraw(self, job_id: str, scheduled_at: int, withdrawal: Withdrawal, now: int) -> LeaseResult | None:
        """Cancel the run if ``withdrawal`` applies to it as stored (SKIPPED); None: lease as usual
        (it does not apply, the run is gone, or it moved on meanwhile: the lease says what it is)."""
        try:
            run = self.get_run(job_id, scheduled_at)
        except RunNotFound:
            return None
        change = rules.withdrawn(run, withdrawal, now)
        if change is None:
            return None
        try:
            return LeaseResult(LeaseOutcome.SKIPPED, self.transition_run(run, change))
        except ConcurrentModification:
            return None

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
        """Each lease its own conditional write, so one can fail (a throttle) while others commit.
        Those that committed began their attempts and must reach their calls: a failed one is
        reported HELD without a run (its message is hidden for the visibility, then leased again),
        and the batch raises only if every lease failed (nothing was written)."""

        def one(r: LeaseRequest) -> LeaseResult | Exception:
            try:
                if r.confirm and r.seen is not None:
                    return self._confirm(r, worker_id, now)
                return self.lease_one(r, worker_id, now)
            except Exception as exc:
                return exc

        results = self._tables.each(one, requests)
        failed = [result for result in results if isinstance(result, Exception)]
        if failed and len(failed) == len(results):
            raise failed[0]
        if failed:
            logger.warning("%d of %d leases failed; the others stand", len(failed), len(results), exc_info=failed[0])
        return [LeaseResult(LeaseOutcome.HELD, None) if isinstance(r, Exception) else r for r in results]

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
            if finish.confirm:
                return self._confirmed_finish(finish)
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

    # -- stats ------------------------------------------------------------------------------------

    def run_stats(self, owner: str, since: int, until: int) -> RunStats | None:
        if not self.stats_counters:
            return None  # nothing was counted: "unavailable", not "zero runs"
        return stats.run_stats(self._tables, self.leases_table, owner, since, until)

    def _tally(self, run: Run) -> None:
        """Count a run that just turned terminal in the owner's GET /stats counters (1 write unit)."""
        if self.stats_counters:
            stats.tally(self._tables.client, self.leases_table, run)

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
