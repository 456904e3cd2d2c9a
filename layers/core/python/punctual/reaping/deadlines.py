"""Deadline alerts: a job's ``deadline_s`` alerts its owner, once, when

- **a run has not finished** by ``scheduled_at + deadline_s``, whether it is late (never leased),
  slow (running) or stuck (its worker gone): an alert of kind ``deadline_missed``, keyed by the run;
- **a cron instant produced no run** by ``instant + deadline_s`` (no scheduler claimed it: the
  scheduler is down or behind): an alert of kind ``run_missed``, keyed by the run id the instant
  would have had, so at most one per (job, instant).

Where they are found, without reading every job:

- The reaper's tick (:func:`watch_deadlines`) reads the keys of open runs scheduled at least
  :data:`~punctual.model.MIN_DEADLINE_S` ago (``Store.stale_open_runs``: the ``open`` index on aws)
  and of active jobs due at least that long ago (``Store.stale_due_jobs``: the ``due`` index; an
  active job whose ``next_run_at`` is that old is an instant nobody claimed). Only those jobs are
  read, and only runs past their job's deadline are read again. A deployment that keeps up finds
  (almost) nothing old, so it reads one empty index page per shard.
- A stack without the ``open`` index (``open_index=false``) has no index of open runs: there the
  reaper's sweep of the runs table (``Store.past_deadline_runs``, a few pages a pass) keeps the old
  open runs it passes over, and this tick reads those. An open run past its deadline then alerts
  within one sweep of the table, not one reaper interval (docs/api.md).
- A run that ends after its deadline between two ticks is caught where it ends
  (``punctual.runs.deadlines.alert_if_late``, called by ``punctual.runs.outcomes.settle_outcomes``).

Every alert goes through :func:`~punctual.runs.alerts.alert_once` (a conditional record per
(run, kind)): two reapers, or a reaper and a worker, alert once. :class:`DeadlineMemo` spares the
record's write (and the job's read) that a run still open pass after pass would repeat.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from punctual import ids
from punctual.errors import JobNotFound, RunNotFound
from punctual.model import MIN_DEADLINE_S, AlertKind, Job, JobStatus
from punctual.port import Store
from punctual.runs.alerts import Alerter, alert_once
from punctual.runs.deadlines import alert_if_late, missed_alert

WATCH_LIMIT = 500  # keys read per tick from each of the two indexes, at most
MEMO_SIZE = 10_000  # alerted keys and job deadlines remembered by one reaper (then forgotten at once)
JOB_MEMO_MS = 300_000  # a job's deadline_s is read again after this long (an edit shows within 5 min)


@dataclass(slots=True)
class DeadlineMemo:
    """What one reaper remembers between ticks: the alerts it recorded (not attempted again) and
    each job's ``deadline_s`` as read (with when). Only a saving: a new reaper starts empty."""

    alerted: set[str] = field(default_factory=set)
    deadlines: dict[str, tuple[int | None, int]] = field(default_factory=dict)  # job id: (deadline_s, read at)

    def remember(self, key: str) -> None:
        if len(self.alerted) >= MEMO_SIZE:
            self.alerted.clear()
        self.alerted.add(key)


def watch_deadlines(
    store: Store, alerter: Alerter, now: int, *, memo: DeadlineMemo | None = None, limit: int = WATCH_LIMIT
) -> int:
    """Alert the owners of runs past their job's deadline and of cron instants nobody claimed
    within it (see the module docstring). Returns how many alerts were new. Storage errors propagate
    (the next tick tries again; every step is idempotent)."""
    memo = memo if memo is not None else DeadlineMemo()
    before = now - MIN_DEADLINE_S * 1000
    alerts = 0
    jobs: dict[str, Job | None] = {}  # read this tick
    for job_id, scheduled_at in store.stale_open_runs(before, limit):
        deadline_s = _deadline_of(store, memo, jobs, job_id, now)
        key = f"{ids.run_id_for(job_id, scheduled_at)}#{AlertKind.DEADLINE_MISSED.value}"
        if deadline_s is None or scheduled_at + deadline_s * 1000 > now or key in memo.alerted:
            continue
        try:
            run = store.get_run(job_id, scheduled_at)
        except RunNotFound:
            continue
        job = _job(store, jobs, job_id)
        if job is not None and alert_if_late(store, alerter, job, run, now):
            alerts += 1
        memo.remember(key)
    for job_id, due_at in store.stale_due_jobs(before, limit):
        deadline_s = _deadline_of(store, memo, jobs, job_id, now)
        key = f"{ids.run_id_for(job_id, due_at)}#{AlertKind.RUN_MISSED.value}"
        if deadline_s is None or due_at + deadline_s * 1000 > now or key in memo.alerted:
            continue
        job = _job(store, jobs, job_id)
        if _unclaimed(job, due_at):
            assert job is not None
            alerts += alert_once(store, alerter, missed_alert(job, due_at, now))
            memo.remember(key)
    return alerts


def _unclaimed(job: Job | None, due_at: int) -> bool:
    """Whether ``job`` (read now) is an active cron job with a deadline still due at ``due_at``."""
    if job is None or job.status is not JobStatus.ACTIVE or job.deadline_s is None:
        return False
    return job.schedule is not None and job.next_run_at == due_at


def _deadline_of(store: Store, memo: DeadlineMemo, jobs: dict[str, Job | None], job_id: str, now: int) -> int | None:
    known = memo.deadlines.get(job_id)
    if known is not None and now - known[1] < JOB_MEMO_MS:
        return known[0]
    job = _job(store, jobs, job_id)
    if len(memo.deadlines) >= MEMO_SIZE:
        memo.deadlines.clear()
    memo.deadlines[job_id] = (None if job is None else job.deadline_s, now)
    return None if job is None else job.deadline_s


def _job(store: Store, jobs: dict[str, Job | None], job_id: str) -> Job | None:
    if job_id not in jobs:
        try:
            job: Job | None = store.get_job(job_id)
        except JobNotFound:
            job = None
        jobs[job_id] = None if job is None or job.status is JobStatus.DELETED else job
    return jobs[job_id]
