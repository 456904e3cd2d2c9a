"""Planning the claim of a job that names a calendar: the event at its due time, and its next due time.

The claim of a calendar job decides exactly the event at the instant it claims
(``punctual.scheduling.timeline``), with the calendar as the claim reads it (``punctual.calendars.cache``):

- ``RUN`` / ``SHIFTED``: a scheduled run at that instant (a moved run's note says where from);
- ``SKIPPED``: a run recorded ``cancelled`` at that instant, never sent, its note naming the calendar
  and the day (the skip is visible in ``GET /jobs/{id}/runs``; ``runs.note`` starts with ``calendar``);
- none (a time moved elsewhere): no run; the job advances.

Then the job advances to :meth:`Timeline.next_due`. A run already inserted is never decided again:
the claim's insert keeps the first row of an instant (``attribute_not_exists``), whatever a later
claim of the same instant decides with a newer calendar.

Catch-up (a due time older than ``late_after_ms``) follows the job's policy over the *runs* of the
missed span (its skipped times are not recorded: missed times have no rows either way): ``skip``
none, ``latest`` the newest, ``backfill`` the newest ``max_backfill``.
"""

from __future__ import annotations

from punctual.calendars.days import BusinessDays
from punctual.model import Catchup, Run, RunState, Trigger, copy_run
from punctual.port import Advance, DueJob
from punctual.scheduling.planning import Plan, PlanOptions, dispatch_for, is_long_run, new_run
from punctual.scheduling.timeline import Event, EventKind, Raws, Timeline

MAX_CATCHUP_STEPS = 10_000  # due times looked at, newest first, for a catch-up's runs at most


def timeline_of(job: DueJob, days: BusinessDays) -> Timeline:
    """The timeline of a due calendar job."""
    assert job.calendar is not None
    return Timeline(Raws(job.schedule, job.timezone, job.dst, job.run_at), days, job.calendar.mode)


def calendar_plan(job: DueJob, now: int, options: PlanOptions, days: BusinessDays) -> Plan:
    """The runs to insert and the advance to apply for a due job that names a calendar."""
    timeline = timeline_of(job, days)
    due = job.next_run_at
    late = due < now - options.late_after_ms
    trigger = Trigger.CATCHUP if late else Trigger.SCHEDULE
    if not late or job.schedule is None:
        events = [e for e in (timeline.event_at(due),) if e is not None]
        anchor = due
    elif job.catchup is Catchup.SKIP:
        events, anchor = [], now
    else:
        events = _newest_runs(timeline, due, now, 1 if job.catchup is Catchup.LATEST else job.max_backfill)
        anchor = now
    runs = [_run_of(job, e, trigger, now, options) for e in events]
    nxt = timeline.next_due(max([anchor, *(e.at for e in events)]))
    last = max(e.at for e in events) if events else (job.last_run_at or job.next_run_at)
    long = is_long_run(job.timeout_s, options.long_run_after_s)
    # a dispatch per run, as every plan has; the claim sends only those of open runs (not the skips)
    dispatches = [
        dispatch_for(run, job.jitter_s, now, long_run=long, early_s=options.early_s, priority=job.priority)
        for run in runs
    ]
    return Plan(job, runs, dispatches, Advance(job.job_id, due, nxt, last, now))


def _newest_runs(timeline: Timeline, since: int, until: int, limit: int) -> list[Event]:
    """The newest ``limit`` run events (not skips) in [since, until], oldest first."""
    found: list[Event] = []
    at: int | None = until
    for _ in range(MAX_CATCHUP_STEPS):
        at = timeline.previous_due(at) if at is not None else None
        if at is None or at < since or len(found) >= limit:
            break
        event = timeline.event_at(at)
        if event is not None and event.kind is not EventKind.SKIPPED:
            found.append(event)
        at -= 1
    return sorted(found, key=lambda e: e.at)


def _run_of(job: DueJob, event: Event, trigger: Trigger, now: int, options: PlanOptions) -> Run:
    run = new_run(job, event.at, trigger, now, options)
    if event.kind is EventKind.SKIPPED:  # recorded, never sent: the skip is visible in the job's runs
        return copy_run(run, {"state": RunState.CANCELLED, "finished_at": now, "deadline_at": now, "note": event.note})
    return run if event.note is None else copy_run(run, {"note": event.note})
