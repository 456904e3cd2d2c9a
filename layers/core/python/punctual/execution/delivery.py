"""Executing one dispatch message: the worker's protocol, written once against the port.

Every worker (threads of ``punctual worker``, the worker Lambda on its SQS event source, the
workers of ``punctual dev``) runs :func:`process_delivery` on each message it receives::

    message ──parse run id──> wait for not_before ──> read job ──lease run──> target (heartbeat) ──> finish
                 │ bad: delete                            │ gone: cancel  │ HELD:       wait until the lease ends
                 │                                        │ run, delete   │ NOT_READY:  wait until the backoff ends
                 │                                                        │ FINISHED / NOT_FOUND: delete (duplicate)
                 │                                                        │ SKIPPED (overlap=forbid): delete
                 │                 over a tenant limit (punctual.tenancy.admission, before the lease):
                 │                 wait for a jittered backoff; never failed, no attempt used

A message waits hidden (in flight) for a minute at most; longer, it is re-sent with a delay, or,
for a retry parked in its run's row, deleted (``punctual.execution.waits``).

The job's overlap policy is decided by the lease, at the run's instant (``rules.overlap_*``).

The message is the run's lease clock on the queue side, so every open run keeps a live message:

- every terminal finish first releases the job's dependents (``punctual.dependencies.release``)
  and alerts the owner if it must, and only then deletes the message: a crash in between leaves
  the message, whose redelivery finds the run terminal and does both again (both are idempotent);
- success → ``succeeded``, delete the message;
- a retryable failure (error, retryable status, timeout) while ``attempt <= max_retries`` →
  ``retrying`` with ``next_attempt_at = now + backoff``, and the message waits for the backoff: it
  comes back (or, re-sent or parked, a new one comes) when the run may be leased again;
- a retryable failure past ``max_retries`` → ``dead``, owner alerted, delete;
- a failure retrying cannot fix (see ``punctual.runs.retry``) → ``failed`` at once, owner alerted, delete;
- a finish or heartbeat refused with :class:`LeaseLost` (the lease expired and another worker took
  the run over, or the run was cancelled) → the result is discarded and the message is left alone:
  the newer attempt's outcome stands.

Each attempt appends an :class:`Attempt` to the run (worker, times, outcome, status, bounded error
and response excerpt): the run's log.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from punctual import ids, rules
from punctual import metrics as m
from punctual.clock import Clock
from punctual.errors import InvalidId, LeaseLost
from punctual.execution.changes import (
    accepts,
    attempt_change,
    attempt_record,
    bury_change,
    log_on_cancelled_run,
    settle_owed,
)
from punctual.execution.leasing import (
    cancel_orphan,
    hidden_until,
    lease_length_ms,
    observe_start,
    visibility_short,
    wait_for_limits,
    waited_before,
    withdrawal_of,
)
from punctual.execution.options import ExecutionOptions, Outcome
from punctual.execution.targets import TargetExecutor, TargetResult, failed, timed_out
from punctual.execution.waits import parked, wait_one
from punctual.model import Attempt, Job, Run
from punctual.port import Delivery, LeaseOutcome, LeaseResult, Queue, RunChange, Store
from punctual.runs import retry
from punctual.runs.alerts import Alerter, LogAlerter
from punctual.runs.cancel import live_job
from punctual.tenancy.admission import Gate

logger = logging.getLogger(__name__)


def process_delivery(
    delivery: Delivery,
    *,
    store: Store,
    queue: Queue,
    targets: TargetExecutor,
    clock: Clock,
    worker_id: str,
    options: ExecutionOptions | None = None,
    alerter: Alerter | None = None,
    metrics: m.Metrics | None = None,
    gate: Gate | None = None,
) -> Outcome:
    """Handle one received dispatch message end to end; see the module docstring for the rules.

    ``metrics`` receives the start lateness of each first attempt (``leasing.observe_start``) and
    counts the dependent runs a finished run releases (``RunsDispatched``).

    ``queue`` must be the queue the message came from (``extend``/``delete`` use its receipt).
    ``gate`` applies the owners' tenant limits (None: no limits).
    Returns what happened. Storage and queue errors propagate: the message is then simply
    redelivered after its visibility timeout, and every step is safe to repeat.
    """
    ctx = _Context(
        store, queue, delivery, clock, worker_id, options or ExecutionOptions(), alerter or LogAlerter(), gate, metrics
    )
    try:
        job_id, scheduled_at = ids.parse_run_id(delivery.run_id)
    except InvalidId:
        logger.error("dropping a message that names no run: %r %s", delivery.run_id, delivery.extra)
        queue.delete(delivery.receipt)
        return Outcome.INVALID

    if delivery.not_before - clock.now_ms() > ctx.options.max_early_ms:  # whole-second SQS delays: ~1 s early at most
        ctx.hide(delivery.not_before, delivery.extra.get("group"))
        return Outcome.NOT_READY

    # Messages become visible up to a second early (whole-second SQS delays): wait out the rest
    # before leasing, so the lease (and the run's started_at) begins at the run's instant.
    early_ms = delivery.not_before - clock.now_ms()
    if early_ms > 0:
        clock.sleep(early_ms / 1000)

    job = live_job(store, job_id)
    if job is None:
        outcome = cancel_orphan(store, job_id, scheduled_at, clock.now_ms())
        if outcome is Outcome.CANCELLED:
            ctx.drop()
        return outcome

    now = clock.now_ms()
    admission = None
    if gate is not None:
        admission = gate.admit(job.owner, delivery.run_id, now, tries=delivery.receive_count, job=job)
        if not admission.admitted:
            return wait_for_limits(store, queue, clock, delivery, admission, options=ctx.options)
    waited = waited_before(store, delivery, scheduled_at) if admission is not None and admission.limited else None
    lease_ms = lease_length_ms(job, ctx.options)
    withdrawn = withdrawal_of(job, scheduled_at)
    lease = store.lease_run(job_id, scheduled_at, worker_id, now, lease_ms, overlap=job.overlap, withdrawn=withdrawn)
    if gate is not None and admission is not None:
        gate.settle(admission, lease.outcome)
    if lease.outcome is not LeaseOutcome.LEASED or lease.run is None:
        return _not_leased(ctx, job, lease)
    observe_start(metrics, job, lease.run, now, waited)
    return _LeasedAttempt(ctx, job, lease.run, lease_ms, waited).execute(targets)


@dataclass(frozen=True, slots=True)
class _Context:
    """Everything one delivery is handled with."""

    store: Store
    queue: Queue
    delivery: Delivery
    clock: Clock
    worker_id: str
    options: ExecutionOptions
    alerter: Alerter
    gate: Gate | None = None
    metrics: m.Metrics | None = None

    def hide(self, until: int, group: str | None, *, parked_run: bool = False) -> None:
        """Let the message wait until ``until`` (epoch ms): hidden, re-sent in ``group`` (the run's
        owner) or, for a ``parked_run``, deleted (``punctual.execution.waits``)."""
        now = self.clock.now_ms()
        wait_one(self.queue, self.delivery, until, now, self.options, group=group, parked_run=parked_run)

    def drop(self) -> None:
        self.queue.delete(self.delivery.receipt)

    def settle(self, job: Job, run: Run, now: int) -> None:
        """What a terminal run owes before its message may go (``changes.settle_owed``)."""
        settle_owed(self.store, self.queue, self.alerter, job, run, now, options=self.options, metrics=self.metrics)


# -- not leased ---------------------------------------------------------------------------------


def _not_leased(ctx: _Context, job: Job, lease: LeaseResult) -> Outcome:
    if lease.outcome in (LeaseOutcome.HELD, LeaseOutcome.NOT_READY):
        ctx.hide(hidden_until(lease, ctx.clock.now_ms(), ctx.options), job.owner, parked_run=parked(lease.run))
        return Outcome.HELD if lease.outcome is LeaseOutcome.HELD else Outcome.NOT_READY
    if lease.outcome is LeaseOutcome.SKIPPED:
        ctx.drop()
        return Outcome.SKIPPED
    if lease.run is not None:
        # A worker that crashed between its finish and its release or alert left the message (or
        # the reaper sent one for a run it buried): release and alert now (idempotent).
        ctx.settle(job, lease.run, ctx.clock.now_ms())
    ctx.drop()
    return Outcome.DUPLICATE


# -- one leased attempt -----------------------------------------------------------------------------


class _LeasedAttempt:
    """One leased attempt: wait for its instant, run the target under a deadline with heartbeats, finish."""

    def __init__(self, ctx: _Context, job: Job, run: Run, lease_ms: int, waited: str | None = None) -> None:
        self.ctx, self.job, self.run, self.lease_ms, self.waited = ctx, job, run, lease_ms, waited

    def execute(self, targets: TargetExecutor) -> Outcome:
        if not rules.attempt_allowed(self.run.attempt, self.job.max_retries):
            # earlier attempts lost their workers and each of them counted (rules.attempt_allowed)
            return self._bury_without_executing()
        if visibility_short(self.lease_ms, self.ctx.options):  # keep the message hidden as long as the lease
            self._extend_message()
        started_at = self.ctx.clock.now_ms()
        result = self._run_target(targets)
        if result is None:
            logger.warning("run %s attempt %d: lease lost while running; result discarded", *self._ids())
            return Outcome.LEASE_LOST
        return self._finish(result, started_at)

    def _ids(self) -> tuple[str, int]:
        return self.run.run_id, self.run.attempt

    def _run_target(self, targets: TargetExecutor) -> TargetResult | None:
        """The target's result, a timeout result at ``timeout_s``, or None if the lease was lost.

        The target runs on its own (daemon) thread so that a target that ignores its deadline can
        be abandoned at ``timeout_s``; this thread heartbeats meanwhile.
        """
        timeout_s = float(self.job.timeout_s)
        deadline = time.monotonic() + timeout_s
        call = _Call(lambda: targets.execute(self.job, self.run, self.run.attempt, deadline))
        call.start()
        interval = max(self.lease_ms / 3000, self.ctx.options.min_heartbeat_s)
        next_beat = time.monotonic() + interval
        while True:
            call.join(max(0.0, min(deadline, next_beat) - time.monotonic()))
            if not call.is_alive():
                return call.result()
            now = time.monotonic()
            if now >= deadline:
                return timed_out(timeout_s)
            if now >= next_beat:
                if not self._heartbeat():
                    return None
                next_beat = now + interval

    def _heartbeat(self) -> bool:
        """Extend the lease and the message; False if the lease is lost (stop and abandon)."""
        until = self.ctx.clock.now_ms() + self.lease_ms
        try:
            self.ctx.store.heartbeat_run(
                self.job.id, self.run.scheduled_at, self.ctx.worker_id, self.run.attempt, until
            )
        except LeaseLost:
            return False
        except Exception:  # a transient storage error: the lease margin absorbs a missed beat
            logger.exception("heartbeat of run %s failed; trying again at the next beat", self.run.run_id)
            return True
        self._extend_message()
        return True

    def _extend_message(self) -> None:
        try:
            self.ctx.queue.extend(self.ctx.delivery.receipt, retry.visibility_s(self.lease_ms))
        except Exception:  # a redelivery meanwhile is harmless: the other worker finds the run HELD
            logger.warning("could not extend the message of run %s", self.run.run_id, exc_info=True)

    def _finish(self, result: TargetResult, started_at: int) -> Outcome:
        now = self.ctx.clock.now_ms()
        accepted = accepts(self.job, result)
        verdict = retry.verdict(
            ok=result.ok,
            retryable=result.retryable,
            attempt=self.run.attempt,
            max_retries=self.job.max_retries,
            accepted=accepted,
        )
        worker = self.ctx.worker_id
        record = attempt_record(result, self.run.attempt, worker, started_at, now, self.waited, accepted=accepted)
        change = attempt_change(self.job, self.run, verdict, record, now, options=self.ctx.options)
        try:
            finished = self._finish_held(change)
        except LeaseLost:
            logger.warning("run %s attempt %d: finish refused (taken over); the newer attempt stands", *self._ids())
            self._log_on_cancelled_run(record, now)
            return Outcome.LEASE_LOST
        if accepted:  # its callback ends it: the run keeps its slots, its row its deadline
            self.ctx.drop()
            return Outcome.ACCEPTED
        self._release_slot()
        if verdict is retry.Verdict.RETRY:
            assert change.next_attempt_at is not None  # the message (or its re-send) brings the next attempt
            self.ctx.hide(change.next_attempt_at, self.job.owner, parked_run=parked(finished))
            return Outcome.RETRYING
        return self._ended(finished, now)

    def _release_slot(self) -> None:
        """After a finish: the run no longer runs, so its concurrency slot goes (a crash before this
        leaves the slot to the reaper's repair)."""
        if self.ctx.gate is not None:
            self.ctx.gate.release(self.job.owner, self.run.run_id, self.job)

    def _finish_held(self, change: RunChange) -> Run:
        """Apply ``change`` under this attempt's lease; raises :class:`LeaseLost` if it was lost."""
        return self.ctx.store.finish_run(
            self.job.id, self.run.scheduled_at, self.ctx.worker_id, self.run.attempt, change
        )

    def _ended(self, finished: Run, now: int) -> Outcome:
        """A terminal finish: release dependents, alert the owner if the run failed, drop the message."""
        self.ctx.settle(self.job, finished, now)
        self.ctx.drop()
        return Outcome(finished.state.value)

    def _log_on_cancelled_run(self, record: Attempt, now: int) -> None:
        log_on_cancelled_run(self.ctx.store, self.run, record, now)

    def _bury_without_executing(self) -> Outcome:
        now = self.ctx.clock.now_ms()
        change = bury_change(self.job, self.run, now)
        try:
            finished = self._finish_held(change)
        except LeaseLost:
            return Outcome.LEASE_LOST
        self._release_slot()
        return self._ended(finished, now)


class _Call(threading.Thread):
    """Runs a target call; its result (or its exception, as a retryable failure) is read after join."""

    def __init__(self, fn: Callable[[], TargetResult]) -> None:
        super().__init__(name="punctual-target", daemon=True)
        self._fn = fn
        self._result: TargetResult | None = None
        self._error: BaseException | None = None

    def run(self) -> None:
        try:
            self._result = self._fn()
        except BaseException as exc:  # reported through result(); a target never kills the worker
            self._error = exc

    def result(self) -> TargetResult:
        if self._result is not None:
            return self._result
        error = self._error
        return failed(f"{type(error).__name__}: {error}" if error else "target returned nothing", retryable=True)
