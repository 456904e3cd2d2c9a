"""Cancelling an open run: one rule for the scheduler (overlap=replace), the worker and the reaper
(the run's job was deleted), and the test they share for "was its job deleted?" (:func:`live_job`)."""

from __future__ import annotations

from punctual.errors import ConcurrentModification, JobNotFound, RunNotFound
from punctual.model import Job, JobStatus, Run, RunState
from punctual.port import RunChange, Store


def cancellation(now: int, note: str) -> RunChange:
    """The change that ends an open run as ``cancelled``, with why. The lease its attempt held is
    kept: its call may go on until its worker's next heartbeat, and its slots with it (``repair_slots``)."""
    return RunChange(state=RunState.CANCELLED, now=now, deadline_at=now, finished_at=now, note=note, clear_lease=False)


def cancel_open_run(store: Store, run: Run, note: str, now: int, *, tries: int) -> bool | None:
    """Cancel ``run`` (as read) by compare-and-set; when it moved on meanwhile, re-read it and try
    again while it is still open, at most ``tries`` writes.

    Returns True once cancelled, False if it is no longer open (finished, or gone), None if it
    kept changing under us (the caller leaves it for later).
    """
    for _ in range(tries):
        try:
            store.transition_run(run, cancellation(now, note))
            return True
        except ConcurrentModification:
            try:
                run = store.get_run(run.job_id, run.scheduled_at)
            except RunNotFound:
                return False
            if not run.is_open:
                return False
    return None


def live_job(store: Store, job_id: str) -> Job | None:
    """The run's job, or None if it no longer exists or was deleted (its runs are cancelled)."""
    try:
        job = store.get_job(job_id)
    except JobNotFound:
        return None
    return None if job.status is JobStatus.DELETED else job
