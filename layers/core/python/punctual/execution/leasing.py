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
from collections import defaultdict
from collections.abc import Sequence

from punctual import ids
from punctual import metrics as m
from punctual.clock import Clock
from punctual.errors import ConcurrentModification, InvalidId, RunNotFound
from punctual.execution.changes import bounded_note
from punctual.execution.options import ExecutionOptions, Outcome
from punctual.model import Job, JobStatus, Run, RunState, Withdrawal
from punctual.port import Delivery, Dispatch, LeaseOutcome, LeaseResult, Queue, RunChange, Store, message_priority
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
    with contextlib.suppress(RunNotFound, ConcurrentModification):
        change = _waiting_change(store.get_run(job_id, scheduled_at), admission, now, options)
        if change is not None:
            store.transition_run(*change)
    resend = _resend(delivery, admission, now, options)
    if resend is not None:
        queue.send([resend])
        queue.delete(delivery.receipt)
    else:
        queue.extend(delivery.receipt, retry.visibility_s(_retry_at(admission, now) - now))
    return Outcome.THROTTLED


def wait_all_for_limits(
    store: Store, queue: Queue, clock: Clock, waits: Sequence[tuple[Delivery, Admission]], *, options: ExecutionOptions
) -> list[tuple[Delivery, Admission]]:
    """:func:`wait_for_limits` for a batch of refused runs (each ``THROTTLED``): a read of each run,
    one write of the notes that change (``Store.transition_runs``), then the messages hidden
    (one request per visibility), resent and deleted in batches. A knock of a backlog waiting for a
    slot then costs a share of a few requests, not a few of its own. Returns the waits whose
    messages were hidden (their receipts stay valid: such a run can be woken through it)."""
    if not waits:
        return []
    now = clock.now_ms()
    changes = []
    for delivery, admission in waits:  # one read each, as one wait reads (a worker Lambda may not batch-read runs)
        with contextlib.suppress(RunNotFound):
            change = _waiting_change(store.get_run(*ids.parse_run_id(delivery.run_id)), admission, now, options)
            if change is not None:
                changes.append(change)
    if changes:
        store.transition_runs(changes)
    hides: defaultdict[int, list[str]] = defaultdict(list)
    hidden: list[tuple[Delivery, Admission]] = []
    resends: list[Dispatch] = []
    gone: list[str] = []
    for delivery, admission in waits:
        resend = _resend(delivery, admission, now, options)
        if resend is None:
            hides[retry.visibility_s(_retry_at(admission, now) - now)].append(delivery.receipt)
            hidden.append((delivery, admission))
        else:
            resends.append(resend)
            gone.append(delivery.receipt)
    for visibility, receipts in hides.items():
        queue.extend_many(receipts, visibility)
    if resends:  # sent before the old messages go: a crash between leaves two, never none
        queue.send(resends)
        queue.delete_many(gone)
    return hidden


def _retry_at(admission: Admission, now: int) -> int:
    return admission.retry_at or now + 1000


def _waiting_change(
    run: Run, admission: Admission, now: int, options: ExecutionOptions
) -> tuple[Run, RunChange] | None:
    """The write that shows ``run`` waiting (its note, a deadline past its next try), or None if
    the run shows it already (or is not waiting to start)."""
    retry_at = _retry_at(admission, now)
    note = bounded_note(waiting_note(admission.reason))
    if run.state not in (RunState.SCHEDULED, RunState.RETRYING):
        return None
    if run.note == note and run.deadline_at >= retry_at + 1000:
        return None
    deadline = max(run.deadline_at, retry_at + options.throttle_grace_ms)
    return run, RunChange(run.state, now, deadline, note=note, clear_lease=False)


def _resend(delivery: Delivery, admission: Admission, now: int, options: ExecutionOptions) -> Dispatch | None:
    """The message that replaces ``delivery`` for a wait that is not held in flight (a turn, a
    message received too often, a long wait: see :func:`wait_for_limits`), or None: it is hidden."""
    retry_at = _retry_at(admission, now)
    fresh = admission.turn or delivery.receive_count >= options.requeue_after_receives
    if not fresh and retry_at - now <= options.hold_max_ms:  # a long wait is not held in flight (execution.waits)
        return None
    delay_s = min(max(0, (retry_at - now) // 1000), MAX_DELAY_S)  # never late: the worker waits the rest
    not_before = max(delivery.not_before, retry_at)
    return Dispatch(delivery.run_id, not_before, delay_s, group=admission.owner, priority=message_priority(delivery))


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
