"""Run actions of the job service: trigger a job now, list its runs, read one run (and its notification),
when jobs last ran.

Acts for one ``owner`` as :mod:`punctual.jobs.service` does (another owner's job or run is not
found, never "forbidden"); ``now`` is epoch ms.
"""

from __future__ import annotations

from collections.abc import Sequence

from punctual import ids
from punctual.config import DEFAULT_RETENTION_S
from punctual.errors import InvalidInput, InvalidTransition, RunNotFound
from punctual.jobs.checks import check_limit
from punctual.jobs.service import get_job
from punctual.model import Job, JobStatus, Notification, Run
from punctual.port import Page, Queue, RunQuery, Store
from punctual.runs.outcomes import ENDED
from punctual.scheduling import cron
from punctual.scheduling.planning import PlanOptions, dispatch_for, is_long_run, manual_run, off_schedule


def trigger_job(
    store: Store,
    queue: Queue,
    owner: str,
    job_id: str,
    now: int,
    *,
    retention_s: int = DEFAULT_RETENTION_S,
    dispatch_grace_ms: int = PlanOptions().dispatch_grace_ms,
    long_run_after_s: int | None = None,
) -> Run:
    """Run the job now, outside its schedule: insert a manual run, then send its dispatch.

    Works for active, paused and completed jobs; a deleted job is InvalidTransition. The run is
    inserted before it is sent, so a crash in between leaves a run the reaper finds past its
    ``deadline_at`` and requeues. The run's instant is ``now``, or the next millisecond that is not
    a whole second (:func:`~punctual.scheduling.planning.off_schedule`), so it never takes a
    scheduled run's instant. A second trigger within the same millisecond returns the same run
    (runs are unique per (job, scheduled_at)). The job's overlap policy applies to it as to every
    run, when a worker first leases it: under forbid, an earlier run still open then skips it
    (cancelled, never called); under replace, it cancels the earlier open runs. A trigger is no
    override (docs/api.md).
    """
    job = get_job(store, owner, job_id)
    if job.status is JobStatus.DELETED:
        raise InvalidTransition(f"job {job_id} is deleted; it cannot be triggered", field="status")
    at = off_schedule(now)  # never the instant of a run the schedule makes (off_schedule says why)
    if at == job.next_run_at:  # a one-time job's own instant, given to the millisecond
        at = off_schedule(at, 1)
    run = manual_run(job.id, owner, at, PlanOptions(dispatch_grace_ms=dispatch_grace_ms, retention_s=retention_s))
    if not store.insert_runs([run])[0]:
        run = store.get_run(job.id, at)
    if run.is_open:
        long_run = is_long_run(job.timeout_s, long_run_after_s)
        queue.send([dispatch_for(run, 0, now, long_run=long_run, priority=job.priority)])
    return run


def list_runs(store: Store, owner: str, job_id: str, query: RunQuery) -> Page[Run]:
    """The runs of the owner's job matching ``query``, newest first.

    Raises :class:`JobNotFound`, :class:`InvalidInput` (limit, since after until), :class:`InvalidCursor`.
    """
    check_limit(query.limit)
    if query.since is not None and query.until is not None and query.since > query.until:
        raise InvalidInput("'since' must not be after 'until'", field="since")
    get_job(store, owner, job_id)
    return store.list_runs(job_id, query)


def get_run(store: Store, owner: str, run_id: str) -> Run:
    """The owner's run with its attempts. Raises :class:`InvalidId` and :class:`RunNotFound`."""
    job_id, scheduled_at = ids.parse_run_id(run_id)
    try:
        run = store.get_run(job_id, scheduled_at)
    except RunNotFound:
        run = None
    if run is None or run.owner != owner:
        raise RunNotFound(f"no run {run_id}", field="run_id")  # same answer for absent and foreign
    return run


def notification_of(store: Store, run: Run) -> Notification | None:
    """The notification ``run`` owed its job's ``notify`` webhook, with its tries (None: none, or not
    yet: only a run that ended can owe one)."""
    if run.state not in ENDED:
        return None
    return store.get_notification(run.job_id, run.scheduled_at)


def last_run_times(store: Store, jobs: Sequence[Job], now: int) -> dict[str, int | None]:
    """When each job last ran, as the API shows it (``last_run_at``): the ``scheduled_at`` of its
    newest run due by ``now`` that was not cancelled, whatever created it (its schedule, a trigger, a
    dependency release, a replay); None before the first, and while every run it has (among its
    newest ``LAST_RUN_SCAN``) was cancelled: an instant skipped by overlap=forbid or by its
    calendar, a paused one-time job's instant, a run cancelled with its job. A run claimed ahead of
    its instant counts from its instant.

    ``Job.last_run_at`` is the scheduler's own mark (the newest run *it* created: the catch-up
    anchor and the overlap reference), so the last run is read among the runs (``Store.newest_run_times``:
    one read per job, two when the newest was cancelled) and no run's path writes anything for it;
    the scheduler's mark answers once retention removed every run of the job.
    """
    newest = store.newest_run_times([job.id for job in jobs], now)
    return {job.id: newest.get(job.id, _due_by(job.last_run_at, now)) for job in jobs}


def _due_by(at: int | None, now: int) -> int | None:
    return at if at is not None and at <= now else None


def next_run_times(jobs: Sequence[Job], now: int) -> dict[str, int | None]:
    """When each job is due next, as the API shows it (``next_run_at``): the job's stored
    ``next_run_at`` is the first time no claim has taken yet, up to the lookahead and the claim
    window ahead of the times already claimed (``Settings.claim_window_s``); an active cron job's
    next time after ``now`` comes first when it is earlier (a claimed time: it runs unless the user
    withdraws it). Computed, never read."""
    return {job.id: _next_time(job, now) for job in jobs}


def _next_time(job: Job, now: int) -> int | None:
    stored = job.next_run_at
    if stored is None or stored <= now or job.status is not JobStatus.ACTIVE or job.schedule is None:
        return stored
    if job.calendar is not None:  # a calendar may move or skip the schedule's times: never claimed ahead
        return stored
    return min(stored, cron.next_fire(job.schedule, job.timezone, now, job.dst))
