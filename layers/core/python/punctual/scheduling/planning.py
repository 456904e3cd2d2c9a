"""Planning a claim: which runs a due job gets now, and where its next_run_at moves.

Pure functions of a :class:`~punctual.port.DueJob` and ``now``: no I/O, so every rule here is
unit-tested without an engine.

Catch-up (a job whose time passed while no scheduler claimed it, or that was resumed):
- ``latest`` (default): one run for the most recent missed time, then continue on schedule.
- ``skip``: no run for missed times; continue with the next future time.
- ``backfill``: one run per missed time, the newest ``max_backfill`` of them, then continue.
A due time counts as missed only once it is more than ``late_after_ms`` old, so a scheduler that is
a little behind (a top-of-minute backlog) still produces the on-time run, not a catch-up.
One-time jobs always get their run, however late (marked ``catchup`` when late).

Claim window (``PlanOptions.window_ms``, ``Settings.claim_window_s``; 0 by default): an on-time
cron job is claimed for every time of its schedule up to its next *window boundary*, not for its
next time alone, so that its head moves (and pays its ``due`` index move) once per window rather
than once per run. A job's boundaries are ``window_ms`` apart at a phase taken from its id, so the
jobs of one schedule reach theirs at different minutes and the claims stay spread. Each claimed
time is a run and a delayed message as usual: the lease at its instant decides it (pause, delete,
edit, replace), as it does for a run claimed a lookahead ahead. Times whose message would need a
longer SQS delay than ``MAX_DELAY_S`` (with the job's jitter) wait for a later claim.
"""

from __future__ import annotations

from dataclasses import dataclass

from punctual import ids
from punctual.config import DEFAULT_RETENTION_S
from punctual.model import Catchup, Run, RunState, Trigger
from punctual.port import Advance, Dispatch, DueJob
from punctual.resources import MAX_DELAY_S
from punctual.scheduling import cron as schedule


@dataclass(frozen=True, slots=True)
class PlanOptions:
    late_after_ms: int = 60_000  # older than this, a due time is "missed" (catch-up policy applies)
    dispatch_grace_ms: int = 120_000  # a scheduled run not leased by not_before + this is reaped
    retention_s: int = DEFAULT_RETENTION_S  # run history retention (TTL)
    long_run_after_s: int | None = None  # jobs with a longer timeout_s: dispatched as long runs (Settings)
    # messages turn visible up to early_s + 1 s before their instant, so that a long-running
    # worker can pre-lease them (Settings.prelease_s; ExecutionOptions.prelease_s)
    early_s: int = 0
    # claim an on-time cron job's times up to its next window boundary at once (module docstring); 0: one time
    window_ms: int = 0


@dataclass(frozen=True, slots=True)
class Plan:
    job: DueJob
    runs: list[Run]
    dispatches: list[Dispatch]
    advance: Advance


def plan(job: DueJob, now: int, options: PlanOptions) -> Plan:
    """The runs to insert and the advance to apply for one due job (``job.next_run_at`` <= now + lookahead)."""
    times, trigger = _times_to_run(job, now, options)
    if trigger is Trigger.SCHEDULE and options.window_ms > 0 and times:
        times = window_times(job, times[0], now, options.window_ms)
    runs = [
        _new_run(job.job_id, job.owner, at, jitter_s=job.jitter_s, trigger=trigger, now=now, options=options)
        for at in times
    ]
    nxt = _next_after(job, max(times) if times else now)
    last = max(times) if times else (job.last_run_at or job.next_run_at)
    advance = Advance(job.job_id, job.next_run_at, nxt, last, now)
    long = is_long_run(job.timeout_s, options.long_run_after_s)
    dispatches = [
        dispatch_for(run, job.jitter_s, now, long_run=long, early_s=options.early_s, priority=job.priority)
        for run in runs
    ]
    return Plan(job, runs, dispatches, advance)


MAX_WINDOW_RUNS = 16  # times one claim of a job takes at most (a minute job's 780 s window: 13)


def window_end(job_id: str, at: int, window_ms: int) -> int:
    """The job's first window boundary after ``at``: boundaries are ``window_ms`` apart, at a
    phase in [0, window_ms) taken from the job's id (the same for every claim of the job)."""
    phase = int(ids.unit_fraction(job_id) * window_ms)
    return at + window_ms - (at - phase) % window_ms


def window_times(job: DueJob, first: int, now: int, window_ms: int) -> list[int]:
    """``first`` and the job's next times before its window boundary after ``first``, at most
    :data:`MAX_WINDOW_RUNS`, each sendable now with one SQS delay (its time plus the job's largest
    jitter at most ``MAX_DELAY_S`` from ``now``)."""
    if job.schedule is None:
        return [first]
    end = window_end(job.job_id, first, window_ms)
    latest = now + (MAX_DELAY_S - job.jitter_s) * 1000
    times = [first]
    while len(times) < MAX_WINDOW_RUNS:
        nxt = schedule.next_fire(job.schedule, job.timezone, times[-1], job.dst)
        if nxt >= end or nxt > latest:
            break
        times.append(nxt)
    return times


def dispatch_for(
    run: Run, jitter_s: int, now: int, *, long_run: bool = False, early_s: int = 0, priority: int | None = None
) -> Dispatch:
    """The message for ``run`` (of a job of ``priority``: ``Dispatch.priority``): it becomes visible
    at most ``early_s`` + 1 seconds before ``not_before``.

    SQS delays are whole seconds, so the delay is rounded down and the worker waits out the rest;
    a run is never started late because of rounding. ``early_s`` gives a pre-leasing worker time
    to lease the run before its instant.
    """
    not_before = run.scheduled_at + jitter_offset_ms(run.run_id, jitter_s)
    delay_s = min(max(0, (not_before - now) // 1000 - early_s), MAX_DELAY_S)
    return Dispatch(run.run_id, not_before, delay_s, group=run.owner, long_run=long_run, priority=priority)


def is_long_run(timeout_s: int | None, long_run_after_s: int | None) -> bool:
    """Whether a run of a job with ``timeout_s`` goes to the long-run queue (see Settings)."""
    return timeout_s is not None and long_run_after_s is not None and timeout_s > long_run_after_s


def jitter_offset_ms(run_id: str, jitter_s: int) -> int:
    """A deterministic offset in [0, jitter_s) s: a redispatch of the same run lands on the same instant."""
    if jitter_s <= 0:
        return 0
    return int(ids.unit_fraction(run_id) * jitter_s * 1000)


def _times_to_run(job: DueJob, now: int, options: PlanOptions) -> tuple[list[int], Trigger]:
    due = job.next_run_at
    if due >= now - options.late_after_ms:
        return [due], Trigger.SCHEDULE
    if job.schedule is None:  # a late one-time job still runs once
        return [due], Trigger.CATCHUP
    if job.catchup is Catchup.SKIP:
        return [], Trigger.CATCHUP
    latest = schedule.latest_fire_at_or_before(job.schedule, job.timezone, now, job.dst)
    latest = due if latest is None or latest < due else latest
    if job.catchup is Catchup.LATEST:
        return [latest], Trigger.CATCHUP
    return _newest_missed(job, due, latest, job.max_backfill), Trigger.CATCHUP


def _newest_missed(job: DueJob, due: int, latest: int, limit: int) -> list[int]:
    assert job.schedule is not None
    times = [latest]
    while len(times) < limit:
        prev = schedule.latest_fire_at_or_before(job.schedule, job.timezone, times[-1] - 1, job.dst)
        if prev is None or prev < due:
            break
        times.append(prev)
    return sorted(times)


def _next_after(job: DueJob, after: int) -> int | None:
    if job.schedule is None:
        return None
    return schedule.next_fire(job.schedule, job.timezone, after, job.dst)


def new_run(job: DueJob, at: int, trigger: Trigger, now: int, options: PlanOptions) -> Run:
    """A scheduled run of ``job`` at ``at``, as the claim makes it (``punctual.scheduling.calendar_planning``)."""
    return _new_run(job.job_id, job.owner, at, jitter_s=job.jitter_s, trigger=trigger, now=now, options=options)


def off_schedule(at: int, rank: int = 0) -> int:
    """The ``rank``-th millisecond at or after ``at`` (rank 0: the first) that is not a whole second.

    Why: a run is keyed by its job and instant, and every instant a schedule names (a cron time, a
    calendar's shift, the DST policy's) is a whole second. A run started by hand or by a replay at
    such an instant would take the key of the run the scheduler has yet to insert there: the
    scheduled run's insert would then be the duplicate no-op, and the user would get one call
    where two were due (the randomized tier's promise (h)). Off whole seconds they never meet.
    """
    first = at + 1 if at % 1000 == 0 else at
    index = first // 1000 * 999 + first % 1000 - 1 + rank  # counts only the 999 usable ms of each second
    return index // 999 * 1000 + index % 999 + 1


def manual_run(job_id: str, owner: str, now: int, options: PlanOptions) -> Run:
    """The run of a job triggered by hand at ``now`` (``POST /jobs/{id}/trigger``): due at once, no jitter."""
    return _new_run(job_id, owner, now, jitter_s=0, trigger=Trigger.MANUAL, now=now, options=options)


def _new_run(
    job_id: str, owner: str, scheduled_at: int, *, jitter_s: int, trigger: Trigger, now: int, options: PlanOptions
) -> Run:
    # model_construct: this is the hot path (20,000 runs/s); every field is produced here, typed.
    return Run.model_construct(
        job_id=job_id,
        scheduled_at=scheduled_at,
        owner=owner,
        state=RunState.SCHEDULED,
        trigger=trigger,
        attempt=0,
        worker_id=None,
        lease_expires_at=None,
        started_at=None,
        finished_at=None,
        next_attempt_at=None,
        # counted from when it is sent (now, for a late or catch-up run), not from a time long past
        deadline_at=max(now, scheduled_at + jitter_offset_ms(ids.run_id_for(job_id, scheduled_at), jitter_s))
        + options.dispatch_grace_ms,
        created_at=now,
        expires_at=now // 1000 + options.retention_s,
        note=None,
        attempts=[],
    )
