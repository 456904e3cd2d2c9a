"""The lease path's rules, the same for the per-message protocol (``punctual.execution.delivery``)
and the batched worker (``punctual.execution.batch``).

How long a lease is (:func:`lease_length_ms`), what withdraws a run at its instant
(:func:`withdrawal_of`), when a message must be hidden as long as its lease
(:func:`visibility_short`), where a run over its owner's tenant limit waits (:func:`wait_for_limits`,
and :func:`waited_before` for the limit a start waited for), how late a start was
(:func:`observe_start`), when a message that could not lease
its run comes back (:func:`hidden_until`), and what becomes of the run of a deleted job
(:func:`cancel_orphan`).
"""

from __future__ import annotations

import contextlib

from punctual import ids
from punctual import metrics as m
from punctual.clock import Clock
from punctual.errors import ConcurrentModification, InvalidId, RunNotFound
from punctual.execution.changes import bounded_note
from punctual.execution.options import ExecutionOptions, Outcome
from punctual.model import Job, JobStatus, Run, RunState, Withdrawal
from punctual.port import Delivery, Dispatch, LeaseOutcome, LeaseResult, Queue, RunChange, Store
from punctual.resources import MAX_DELAY_S
from punctual.runs import retry
from punctual.runs.cancel import cancel_open_run
from punctual.scheduling.instants import still_planned
from punctual.scheduling.planning import jitter_offset_ms
from punctual.tenancy.admission import Admission, waited_for, waiting_note

VISIBILITY_SLACK_MS = 1_000  # between the receive and the lease, beyond the early arrival


def may_have_waited(delivery: Delivery, scheduled_at: int) -> bool:
    """The message shows that its run may have waited for a limit: received before, or resent for
    an instant after the run's (its turn). A fresh message of a jittered run looks the same."""
    return delivery.receive_count > 1 or delivery.not_before > scheduled_at


def waited_before(store: Store, delivery: Delivery, scheduled_at: int) -> str | None:
    """The limit a run of a limited owner waited for before this lease (its note: the lease clears
    it, the attempt's log entry keeps it as ``Attempt.waited``), or None.

    Read only when the message shows a wait (received before, or resent for a later instant):
    one read per start of a run that waited, none for owners without limits.
    """
    if not may_have_waited(delivery, scheduled_at):
        return None
    try:
        job_id, _ = ids.parse_run_id(delivery.run_id)
        return waited_for(store.get_run(job_id, scheduled_at).note)
    except (InvalidId, RunNotFound):
        return None


def observe_start(metrics: m.Metrics | None, job: Job, run: Run, started: int, waited: str | None) -> None:
    """Report ``StartLatenessMs`` for the start of ``run``'s first attempt at ``started``: how long
    after its instant (its ``scheduled_at`` plus the job's jitter) a worker began it.

    Only what the scheduler, the queue and the workers owe: a retry starts at its backoff, and a
    start that ``waited`` for its owner's limits (``max_runs_per_minute``, ``max_concurrency``) is
    the limit working, so neither is observed; the jitter is a spread the job asked for.
    """
    if metrics is None or run.attempt != 1 or waited is not None:
        return
    metrics.observe(
        m.START_LATENESS_MS, max(0, started - run.scheduled_at - jitter_offset_ms(run.run_id, job.jitter_s))
    )


def lease_length_ms(job: Job, options: ExecutionOptions) -> int:
    """How long a worker holds a run: the job's timeout plus a margin to record the outcome."""
    return (job.timeout_s + options.lease_margin_s) * 1000


def withdrawal_of(job: Job, scheduled_at: int) -> Withdrawal | None:
    """What the job, as read at the run's instant, says about the run: paused, or its schedule no
    longer has this instant (``scheduling.instants``); None: nothing withdraws it. The lease
    applies it to the run as stored (``rules.withdrawn``: first lease, triggers concerned)."""
    if job.rescheduled_at is None and job.status is not JobStatus.PAUSED:  # the common case, first
        return None
    if job.status is JobStatus.PAUSED:
        return Withdrawal.PAUSED
    if not still_planned(job, scheduled_at):
        return Withdrawal.OFF_SCHEDULE
    return None


def visibility_short(lease_ms: int, options: ExecutionOptions) -> bool:
    """The message's visibility may end before a lease of ``lease_ms`` that begins now: it was
    received up to ``max_early_ms`` before the instant (a pre-leased run), with ``visibility_s``."""
    return lease_ms > options.visibility_s * 1000 - options.max_early_ms - VISIBILITY_SLACK_MS


def wait_for_limits(
    store: Store, queue: Queue, clock: Clock, delivery: Delivery, admission: Admission, *, options: ExecutionOptions
) -> Outcome:
    """The run's owner is at a limit: the run waits until ``admission.retry_at`` without using an attempt.

    The wait is written on the run (its note, and a deadline past the next try so the reaper does
    not resend it) when the note is new or the deadline would pass first: one write when a run
    starts waiting, then about one per ``throttle_grace_ms`` of waiting.

    A run waiting for its turn of ``max_runs_per_minute`` (``admission.turn``) is resent with its
    turn as ``not_before``, due a second early at most (whole-second delays), and the worker that
    receives it holds it until that instant by its own clock, as it does any run's instant: a
    hidden message would come back up to a second late, and be judged by another worker's clock.
    Any other wait hides the message, unless it was received ``requeue_after_receives`` times: it is
    then resent fresh too, since the dead-letter redrive counts receives and waiting must never
    dead-letter a run. A wait longer than ``hold_max_ms`` is resent as well: a hidden message is in
    flight, and a queue holds only so many (``punctual.execution.waits``).
    """
    job_id, scheduled_at = ids.parse_run_id(delivery.run_id)
    now = clock.now_ms()
    retry_at = admission.retry_at or now + 1000
    note = bounded_note(waiting_note(admission.reason))
    with contextlib.suppress(RunNotFound, ConcurrentModification):
        run = store.get_run(job_id, scheduled_at)
        if run.state in (RunState.SCHEDULED, RunState.RETRYING) and (
            run.note != note or run.deadline_at < retry_at + 1000
        ):
            deadline = max(run.deadline_at, retry_at + options.throttle_grace_ms)
            store.transition_run(run, RunChange(run.state, now, deadline, note=note, clear_lease=False))
    fresh = admission.turn or delivery.receive_count >= options.requeue_after_receives
    if fresh or retry_at - now > options.hold_max_ms:  # a long wait is not held in flight (execution.waits)
        delay_s = min(max(0, (retry_at - now) // 1000), MAX_DELAY_S)  # never late: the worker waits the rest
        not_before = max(delivery.not_before, retry_at)
        queue.send([Dispatch(delivery.run_id, not_before, delay_s, group=admission.owner)])
        queue.delete(delivery.receipt)
    else:
        queue.extend(delivery.receipt, retry.visibility_s(retry_at - now))
    return Outcome.THROTTLED


def hidden_until(lease: LeaseResult, now: int, options: ExecutionOptions) -> int:
    """When a message that could not lease its run should come back."""
    run = lease.run
    if lease.outcome is LeaseOutcome.HELD and run is not None and run.lease_expires_at is not None:
        return run.lease_expires_at + 1000  # a lease qualifies for takeover only once expired
    if lease.outcome is LeaseOutcome.NOT_READY and run is not None and run.next_attempt_at is not None:
        return run.next_attempt_at
    return now + options.visibility_s * 1000


def cancel_orphan(store: Store, job_id: str, scheduled_at: int, now: int) -> Outcome:
    """The run's job is gone: cancel the run if it is still open. CANCELLED (cancelled now, already
    closed, or no such run: its message may go), or LEASE_LOST if it kept changing under us (its
    message stays, for a later delivery)."""
    try:
        run = store.get_run(job_id, scheduled_at)
    except RunNotFound:
        return Outcome.CANCELLED
    if run.is_open and cancel_open_run(store, run, "job deleted", now, tries=3) is None:
        return Outcome.LEASE_LOST
    return Outcome.CANCELLED
