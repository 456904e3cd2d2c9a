"""A job's lifecycle: pause, resume and delete, for one ``owner`` as ``punctual.jobs.service`` acts
(another owner's job is not found), with no HTTP and no boto3.

Rules this module owns:
- Status changes follow ``JOB_TRANSITIONS``; asking for the status a job already has is a no-op
  (retries of pause/resume/delete are safe), anything else the lifecycle refuses is
  :class:`InvalidTransition`.
- Resume does not run anything itself: it puts the job back in the due index at its first fire
  time after its last run, and the scheduler's catch-up policy (``job.catchup``: latest, skip or
  backfill; see ``punctual.scheduling.planning``) decides which of the times missed while paused run.
  It starts the count of ``pause_after_failures`` anew (``resumed_at``).
- A one-time job paused after the scheduler claimed its run (before the run began) withdraws that
  run; resumed, it gets the run back (docs/execution.md, the run contract).
- Delete is soft, refused while live jobs depend on the job (unless forced), and one decision with
  that check (``punctual.dependencies.links``).
- Writes are optimistic, as every write of the service's (:func:`punctual.jobs.service.write_job`).
"""

from __future__ import annotations

from punctual import ids
from punctual.clock import from_datetime
from punctual.dependencies import links
from punctual.errors import HasDependents, InvalidTransition, RunNotFound
from punctual.jobs.service import owned_job, write_job
from punctual.model import JOB_TRANSITIONS, Job, JobStatus, RunState
from punctual.port import EdgeChange, EdgeReads, Store
from punctual.scheduling import cron as schedule


def pause_job(store: Store, owner: str, job_id: str, now: int) -> Job:
    """Take an active job out of the due index (paused → no-op). Other states: InvalidTransition.

    A one-time job reads completed from the moment the scheduler claims its run (up to the
    lookahead before its instant): while that run has not begun, it can still be paused, and the
    run is then withdrawn at its instant, never called (docs/execution.md, the run contract).
    """

    def paused(job: Job) -> Job | None:
        if job.status is JobStatus.COMPLETED and _claimed_run_pending(store, job):
            return job.model_copy(update={"status": JobStatus.PAUSED, "next_run_at": None, "updated_at": now})
        return _moved(job, JobStatus.PAUSED, now, next_run_at=None)

    return write_job(store, owner, job_id, paused)


def resume_job(store: Store, owner: str, job_id: str, now: int) -> Job:
    """Put a paused job back in the due index (active → no-op). Other states: InvalidTransition.

    ``next_run_at`` becomes the first fire time after the job's last run (a one-time job: its
    ``run_at``), so times missed while paused are due at once and the scheduler applies the job's
    catch-up policy to them; with nothing missed, it is simply the next fire time.
    """

    def resumed(job: Job) -> Job | None:
        if job.status is JobStatus.COMPLETED:  # the lifecycle allows it, but only through a new run_at
            raise InvalidTransition(
                f"job {job.id} is completed; give it a new run_at (PATCH) to run it again", field="status"
            )
        if job.status is JobStatus.PAUSED and job.run_at is not None and job.last_run_at is not None:
            return _counting_anew(_resumed_after_claim(store, job, now), now)
        moved = _moved(job, JobStatus.ACTIVE, now, _resume_at(job))
        return None if moved is None else _counting_anew(moved, now)

    return write_job(store, owner, job_id, resumed)


def _counting_anew(job: Job, now: int) -> Job:
    """A resumed job counts its failures anew (``pause_after_failures``: runs that ended before the
    resume are not counted, ``punctual.runs.outcomes``), and no longer names the run that paused it."""
    return job.model_copy(update={"resumed_at": now, "paused_after": None})


def _claimed_run_pending(store: Store, job: Job) -> bool:
    """A one-time job's run was claimed (``last_run_at``) and has not begun: scheduled, never leased."""
    if job.run_at is None or job.last_run_at is None:
        return False
    try:
        run = store.get_run(job.id, job.last_run_at)
    except RunNotFound:
        return False
    return run.state is RunState.SCHEDULED and run.attempt == 0


def _resumed_after_claim(store: Store, job: Job, now: int) -> Job:
    """A one-time job paused after its run was claimed, resumed: if that run is still to come, the
    job is completed again and the run goes ahead at its instant; if the pause withdrew it (cancelled,
    never called), the job gets its run now; if it began meanwhile, the job is completed."""
    completed = job.model_copy(update={"status": JobStatus.COMPLETED, "next_run_at": None, "updated_at": now})
    if _claimed_run_pending(store, job):
        return completed
    assert job.last_run_at is not None
    try:
        run = store.get_run(job.id, job.last_run_at)
    except RunNotFound:
        run = None
    if run is not None and run.state is RunState.CANCELLED and run.attempt == 0:  # withdrawn: run it now
        # (its only run is settled, so no earlier schedule is left for the instant check to judge)
        update = {"status": JobStatus.ACTIVE, "next_run_at": now, "updated_at": now, "rescheduled_at": None}
        return job.model_copy(update=update)
    return completed


def delete_job(store: Store, owner: str, job_id: str, now: int, *, force: bool = False) -> Job:
    """Soft-delete: status deleted, out of the due index; the engine expires it after the retention
    (the aws engine sets the jobs table's TTL on deleted jobs).

    The job and its runs stay readable until then. Deleting a deleted job is a no-op. A job that
    other (not deleted) jobs depend on is :class:`HasDependents` unless ``force``: then its
    dependents stay valid and wait. A deleted dependent's reverse edges are removed with it.
    Raises :class:`JobNotFound`, :class:`HasDependents`, :class:`ConcurrentModification`.
    """
    ids.check_job_id(job_id)
    read: list[Job] = []

    # The check for live dependents and the delete are one decision: a dependent created meanwhile
    # bumps this job's version, which the delete is conditioned on (punctual.dependencies.links).
    def deleted(reads: EdgeReads) -> EdgeChange | None:
        job = owned_job(reads, owner, job_id)
        read.append(job)
        moved = _moved(job, JobStatus.DELETED, now, next_run_at=None)
        if moved is None:
            return None
        if not force and job.has_dependents:
            _refuse_if_depended_on(reads, job_id)
        return links.change_of(moved, job.version, [] if job.depends_on is None else job.depends_on.jobs)

    stored = links.decide(store, owner, deleted)
    return read[-1] if stored is None else stored


# -- helpers ----------------------------------------------------------------------------------------


def _resume_at(job: Job) -> int | None:
    if job.depends_on is not None:
        return None  # releases dropped while paused are not backfilled (punctual.dependencies.release)
    if job.schedule is None:
        assert job.run_at is not None
        return from_datetime(job.run_at)  # late or not, a one-time job still gets its run
    anchor = job.last_run_at if job.last_run_at is not None else job.created_at
    return schedule.next_fire(job.schedule, job.timezone, anchor)


def _moved(job: Job, status: JobStatus, now: int, next_run_at: int | None) -> Job | None:
    """``job`` in ``status`` (None if it already is), or InvalidTransition."""
    if job.status is status:
        return None
    if status not in JOB_TRANSITIONS[job.status]:
        raise InvalidTransition(f"job {job.id} is {job.status}; it cannot become {status}", field="status")
    return job.model_copy(update={"status": status, "next_run_at": next_run_at, "updated_at": now})


def _refuse_if_depended_on(reads: EdgeReads, job_id: str) -> None:
    dependents = links.live_dependents(reads, job_id)
    if dependents:
        names = ", ".join(d.id for d in dependents[:5]) + (" ..." if len(dependents) > 5 else "")
        raise HasDependents(
            f"{len(dependents)} job(s) depend on {job_id} ({names}); delete them first,"
            f" or delete with {HasDependents.FORCE} (they stay valid and wait)",
            field="job_id",
            details=[{"field": "depends_on", "message": d.id} for d in dependents],
        )
