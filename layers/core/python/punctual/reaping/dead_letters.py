"""The reaper's dead-letter queue: a message that was received ``max_receives`` times (a run that
crashes its worker every time) marks its run ``dead`` (logged as ``dead_lettered``), releases the
jobs that depend on its job and alerts the owner, unless the run is terminal already, or a worker
holds a live lease on it right now (that worker finishes it; should it vanish, the reaper's
past-deadline step takes over), or it is accepted (its callback or the reaper's timeout ends it).
The message is then deleted, after the release.

Used by the reaper's pass (:func:`drain`, ``punctual.reaping.reaper``) and by the reaper Lambda on
its dead-letter event source (:func:`handle_dead_letter`). The burial's parts (:func:`dead_change`,
:func:`owner_alert`) are the reaper's too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

from punctual import ids, rules
from punctual.clock import Clock
from punctual.dependencies.release import release_dependents
from punctual.errors import ConcurrentModification, InvalidId, RunNotFound
from punctual.model import MAX_ERROR_CHARS, Attempt, AttemptOutcome, Run, RunState, truncate
from punctual.port import Alert, Delivery, Queue, RunChange, Store
from punctual.resources import MAX_BATCH
from punctual.runs.alerts import Alerter, alert_once
from punctual.runs.cancel import live_job
from punctual.runs.outcomes import settle_outcomes

logger = logging.getLogger(__name__)

DEAD_LETTER_NOTE = "dead-lettered: its message was received the maximum number of times without a finish"


class DeadLetterResult(StrEnum):
    DEAD = "dead"  # the run was open and is now dead
    TERMINAL = "terminal"  # the run had finished already
    HELD = "held"  # a worker holds a live lease (or the run is accepted): left to it
    MISSING = "missing"  # no such run, or the message names none
    CONFLICT = "conflict"  # the run kept changing; the message is kept for a later try


@dataclass(slots=True)
class Drained:
    """What one drain of the dead-letter queue did."""

    handled: int = 0  # messages handled and deleted
    dead: int = 0  # runs this drain turned dead (each alerted: the first alert of its run)
    conflicts: int = 0  # messages kept for a later try (their runs kept changing)


def handle_dead_letter(
    store: Store, alerter: Alerter, delivery: Delivery, now: int, *, queue: Queue
) -> DeadLetterResult:
    """Mark the run of a dead-lettered message ``dead``, release its job's dependents (their runs go
    to the dispatch ``queue``) and alert its owner (see the module docstring).

    The caller deletes the message unless the result is CONFLICT. Used by :func:`drain` and by the
    reaper Lambda on its dead-letter event source.
    """
    try:
        job_id, scheduled_at = ids.parse_run_id(delivery.run_id)
    except InvalidId:
        logger.error("dead-letter message names no run: %r %s", delivery.run_id, delivery.extra)
        return DeadLetterResult.MISSING
    for _ in range(3):
        try:
            run = store.get_run(job_id, scheduled_at)
        except RunNotFound:
            return DeadLetterResult.MISSING
        if not run.is_open:
            if run.state is RunState.DEAD:  # a crash between marking and alerting: alert now (idempotent)
                _settle_dead(store, queue, alerter, run, now)
                alert_once(store, alerter, owner_alert(run, run.note or "dead", now))
            return DeadLetterResult.TERMINAL
        if rules.lease_is_live(run, now):
            return DeadLetterResult.HELD
        note = DEAD_LETTER_NOTE
        record = Attempt(number=run.attempt, outcome=AttemptOutcome.DEAD_LETTERED, finished_at=now, error=note)
        try:
            dead = store.transition_run(run, dead_change(record, note, now))
        except ConcurrentModification:
            continue
        _settle_dead(store, queue, alerter, dead, now)
        alert_once(store, alerter, owner_alert(dead, note, now))
        return DeadLetterResult.DEAD
    return DeadLetterResult.CONFLICT


def drain(  # noqa: PLR0917 - what a drain touches, then how much of it
    store: Store, queue: Queue, alerter: Alerter, dead_letters: Queue, clock: Clock, batches: int, visibility_s: int
) -> Drained:
    """Handle up to ``batches`` receives of the dead-letter queue (:func:`handle_dead_letter` each)."""
    drained = Drained()
    for _ in range(batches):
        deliveries = dead_letters.receive(MAX_BATCH, visibility_s)
        for delivery in deliveries:
            result = handle_dead_letter(store, alerter, delivery, clock.now_ms(), queue=queue)
            if result is DeadLetterResult.CONFLICT:
                drained.conflicts += 1
                continue  # comes back after its visibility timeout
            dead_letters.delete(delivery.receipt)
            drained.handled += 1
            if result is DeadLetterResult.DEAD:
                drained.dead += 1
        if len(deliveries) < MAX_BATCH:
            break
    return drained


def dead_change(record: Attempt, note: str, now: int) -> RunChange:
    """A burial: ``dead`` now, with ``record`` logged and ``note`` (bounded) saying why."""
    note = truncate(note, MAX_ERROR_CHARS) or note
    return RunChange(RunState.DEAD, now, now, append=record, finished_at=now, note=note)


def owner_alert(run: Run, reason: str, now: int) -> Alert:
    """The owner alert of a run the reaper buried."""
    return Alert(owner=run.owner, run_id=run.run_id, job_id=run.job_id, created_at=now, reason=reason)


def _settle_dead(store: Store, queue: Queue, alerter: Alerter, run: Run, now: int) -> None:
    """What a dead-lettered run owes besides its alert: its job's dependents released, and the
    outcomes its job asked for (``punctual.runs.outcomes``)."""
    job = live_job(store, run.job_id)
    if job is not None:
        release_dependents(store, queue, job, run, now)
        settle_outcomes(store, alerter, job, run, now)
