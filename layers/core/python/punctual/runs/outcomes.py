"""Run outcomes a job's owner asked to hear about: ``pause_after_failures`` and ``notify``.

Both are decided where a run turns terminal, as part of what the run owes before its message may go
(``punctual.execution.changes.settle_owed``, which the worker and a redelivery call; the reaper's
burials and the dead-letter handler call :func:`settle_outcomes` too). Every step is idempotent and
decided from what is stored, so a crash anywhere is redone by the next delivery of the message:

- **The streak** (:func:`failure_streak`) is counted, not kept: the job's runs that *ended*
  (succeeded, failed or dead; a cancelled run never ran), newest scheduled first, that ended after
  the job's last resume; the streak is how many of the first ones ended failed or dead. A run is a
  run, not an attempt: a failed attempt that will be retried is no outcome yet. Reading it costs one
  query of at most ``pause_after_failures`` ended runs, only when a run of a job with the option
  ends failed or dead; a success, and every run of a job without the option, reads and writes
  nothing more.
- **The pause**: a streak of at least ``pause_after_failures`` pauses the job (conditionally on the
  version read, still active: ``Store.pause_for_failures``), naming the run in ``paused_after``,
  and alerts its owner once (an alert of kind ``job_paused`` keyed by that run). A redelivery finds
  ``paused_after`` naming its run and records the alert if a crash came first. A resume clears
  ``paused_after`` and sets ``resumed_at``: the count starts anew.
- **Notify**: a run that ended with an event of ``notify.on`` (failure: failed or dead; success;
  recovery: a success whose job's previous ended run failed or died, read only when asked for)
  records one notification (``Store.add_notification``, once per run), which the reaper delivers
  (``punctual.execution.notify``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from punctual.clock import iso
from punctual.errors import ConcurrentModification, JobNotFound
from punctual.model import (
    AlertKind,
    Job,
    JobStatus,
    Notification,
    NotifyEvent,
    Run,
    RunState,
    truncate,
)
from punctual.port import Alert, RunQuery, Store
from punctual.runs.alerts import Alerter, alert_once
from punctual.runs.deadlines import alert_if_late

ENDED = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.DEAD})  # runs that ran and ended
FAILURES = frozenset({RunState.FAILED, RunState.DEAD})
BODY_NOTE_CHARS = 500  # the run's note in a notification's body, at most
_PAUSE_ROUNDS = 3  # reads of the job when its version moves under the pause (a claim advanced it)


def owes(job: Job, state: RunState) -> bool:
    """Whether a run of ``job`` that ended in ``state`` owes a pause decision, a notification or a
    deadline check (its message then waits for :func:`settle_outcomes`). False for every job
    without the options."""
    if state in ENDED and job.deadline_s is not None:
        return True  # a run that ends after its deadline alerts (punctual.runs.deadlines)
    if job.pause_after_failures is None and job.notify is None:
        return False
    if state in FAILURES:
        return job.pause_after_failures is not None or _asks(job, NotifyEvent.FAILURE)
    return state is RunState.SUCCEEDED and (_asks(job, NotifyEvent.SUCCESS) or _asks(job, NotifyEvent.RECOVERY))


def settle_outcomes(store: Store, alerter: Alerter, job: Job, run: Run, now: int) -> None:
    """Alert ``run``'s owner if it ended after its job's ``deadline_s``, pause ``job`` if ``run``
    completed a failure streak (and alert its owner), and record the notification ``run`` owes
    (see the module docstring). Idempotent. Storage errors propagate (the caller's message then
    comes back and this is done again)."""
    if run.state not in ENDED or not owes(job, run.state):
        return
    alert_if_late(store, alerter, job, run, now)
    if run.state in FAILURES and job.pause_after_failures is not None:
        pause_if_streak(store, alerter, job, run, now)
    notify = job.notify
    if notify is not None:
        events = events_of(notify.on, run, lambda: previous_ended(store, run))
        if events:
            store.add_notification(notification_of(job, run, events, now))


def failure_streak(store: Store, run: Run, *, limit: int, since: int | None) -> int:
    """How many of the job's ended runs in a row, newest scheduled first, ended failed or dead
    (at most ``limit``), counting only runs that ended after ``since`` (the job's last resume).
    ``run`` is the run being settled, as it was written: it counts even where a read of the job's
    runs does not show it yet (the aws engine's query is eventually consistent)."""
    listed = store.list_runs(run.job_id, RunQuery(states=ENDED, limit=limit)).items
    ended = {one.run_id: one for one in listed}
    ended[run.run_id] = run
    streak = 0
    for one in sorted(ended.values(), key=lambda r: r.scheduled_at, reverse=True):
        counted = since is None or (one.finished_at is not None and one.finished_at > since)
        if one.state not in FAILURES or not counted or streak == limit:
            break
        streak += 1
    return streak


def pause_if_streak(store: Store, alerter: Alerter, job: Job, run: Run, now: int) -> bool:
    """Pause the job if ``run`` (failed or dead) completed a streak of ``pause_after_failures``, and
    alert its owner once. True if the job is paused for this run (here or by an earlier delivery).
    Raises :class:`ConcurrentModification` if the job kept moving under the decision."""
    for _ in range(_PAUSE_ROUNDS):
        try:
            current = store.get_job(job.id)  # its version now, and whether a resume reset the count
        except JobNotFound:
            return False
        threshold = current.pause_after_failures
        if current.paused_after != run.run_id:
            if current.status is not JobStatus.ACTIVE or threshold is None:
                return False
            streak = failure_streak(store, run, limit=threshold, since=current.resumed_at)
            if streak < threshold:
                return False
            if not store.pause_for_failures(current, run.run_id, now):
                continue  # it moved meanwhile (a claim advanced it, a user edited it): judge it again
        reason = (
            f"job {current.name} paused: its last {threshold} runs ended failed or dead "
            f"(pause_after_failures={threshold}), the last {run.run_id}; resume it to run again"
        )
        alert_once(store, alerter, Alert(run.owner, run.run_id, job.id, now, reason, AlertKind.JOB_PAUSED))
        return True
    # the run's message comes back (the caller raises), and its next delivery decides again
    raise ConcurrentModification(f"job {job.id} kept changing; the pause after run {run.run_id} is decided later")


def previous_ended(store: Store, run: Run) -> Run | None:
    """The job's newest run scheduled before ``run`` that ended (succeeded, failed or dead), or None."""
    earlier = RunQuery(states=ENDED, until=run.scheduled_at - 1, limit=1)
    items = store.list_runs(run.job_id, earlier).items
    return items[0] if items else None


def events_of(on: Sequence[NotifyEvent], run: Run, previous: Callable[[], Run | None]) -> list[NotifyEvent]:
    """The events of ``on`` that ``run`` (ended) is: failure, success, recovery. ``previous`` is
    called (the job's previous ended run) only when ``run`` succeeded and ``on`` asks for recovery."""
    if run.state in FAILURES:
        return [NotifyEvent.FAILURE] if NotifyEvent.FAILURE in on else []
    if run.state is not RunState.SUCCEEDED:
        return []
    events = [NotifyEvent.SUCCESS] if NotifyEvent.SUCCESS in on else []
    if NotifyEvent.RECOVERY in on:
        before = previous()
        if before is not None and before.state in FAILURES:
            events.append(NotifyEvent.RECOVERY)
    return events


def notification_of(job: Job, run: Run, events: list[NotifyEvent], now: int) -> Notification:
    """The notification ``run`` owes ``job.notify`` for ``events``, due now; its body fixed here."""
    assert job.notify is not None
    event = NotifyEvent.RECOVERY if NotifyEvent.RECOVERY in events else events[0]
    body = {
        "event": event.value,
        "events": [e.value for e in events],
        "run_id": run.run_id,
        "job_id": job.id,
        "job_name": job.name,
        "state": run.state.value,
        "trigger": run.trigger.value,
        "attempt": run.attempt,
        "scheduled_at": iso(run.scheduled_at),
        "finished_at": iso(run.finished_at),
        "note": truncate(run.note, BODY_NOTE_CHARS),
    }
    if run.replay_of is not None:
        body["replay_of"] = run.replay_of
    return Notification(
        owner=run.owner,
        job_id=run.job_id,
        scheduled_at=run.scheduled_at,
        events=events,
        url=job.notify.url,
        body=json.dumps(body, separators=(",", ":"), ensure_ascii=False),
        created_at=now,
        next_at=now,
        expires_at=run.expires_at,
    )


def _asks(job: Job, event: NotifyEvent) -> bool:
    return job.notify is not None and event in job.notify.on
