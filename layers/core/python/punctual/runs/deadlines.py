"""The deadline alerts of one run or instant (a job's ``deadline_s``): whether a run missed its
deadline, and the alerts' words. Found by the reaper (``punctual.reaping.deadlines``) and where a run
ends (``punctual.runs.outcomes.settle_outcomes``)."""

from __future__ import annotations

from punctual import ids
from punctual.clock import iso
from punctual.model import AlertKind, Job, Run
from punctual.port import Alert, Store
from punctual.runs.alerts import Alerter, alert_once


def alert_if_late(store: Store, alerter: Alerter, job: Job, run: Run, now: int) -> bool:
    """Alert ``run``'s owner (kind ``deadline_missed``) if ``job`` has a ``deadline_s`` and ``run``
    had not finished by then: it is still open at ``now`` past it, or it finished after it. True if
    the alert is new (recorded here)."""
    if job.deadline_s is None:
        return False
    due = run.scheduled_at + job.deadline_s * 1000
    finished = run.finished_at if not run.is_open else None
    late = (finished is None and now >= due) or (finished is not None and finished > due)
    if not late:
        return False
    where = f"it is {run.state}" if run.is_open else f"it ended {run.state} at {iso(run.finished_at)}"
    reason = (
        f"run {run.run_id} of job {job.name} had not finished {job.deadline_s}s after its scheduled time "
        f"{iso(run.scheduled_at)} (deadline_s={job.deadline_s}): {where}"
    )
    return alert_once(store, alerter, Alert(run.owner, run.run_id, job.id, now, reason, AlertKind.DEADLINE_MISSED))


def missed_alert(job: Job, due_at: int, now: int) -> Alert:
    """The ``run_missed`` alert of ``job``'s instant ``due_at``, keyed by the run id it would have had."""
    reason = (
        f"job {job.name}: its run due at {iso(due_at)} had not started {job.deadline_s}s later "
        f"(deadline_s={job.deadline_s}): no scheduler claimed it"
    )
    return Alert(job.owner, ids.run_id_for(job.id, due_at), job.id, now, reason, AlertKind.RUN_MISSED)
