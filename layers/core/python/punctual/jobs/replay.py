"""Replay: new runs for earlier ones (``POST /runs/replay``, ``punctual runs replay``), for one owner.

What qualifies: the owner's runs scheduled in ``[since, until)`` that ended in one of ``states``
(succeeded, failed, dead, cancelled: an open run is still running), of the jobs named, or of every
job of the owner that is not deleted (at most :data:`MAX_SCANNED_JOBS`: an owner with more names
them). Each job's runs in the range are read, filtered by state where the engine can (DynamoDB: a
filter on a query of the job's partition, so a wide range of a busy job reads all of it). At most
:data:`MAX_REPLAY` per call: beyond it the call is refused (:class:`TooManyRuns`) and nothing is
written, so a caller narrows the range, the states or the jobs; a dry run answers the same (it
lists what a replay would start, oldest first).

What a replay writes: one new run per original, trigger ``replay``, ``replay_of`` naming it, due at
once (runs of one job get distinct instants a millisecond apart: a run is keyed by its instant),
inserted then sent, as a manual trigger's (a crash in between leaves runs the reaper finds past
their deadline and sends). Nothing else is special about them: they run through the workers'
lease path like any run, so the owner's limits (``max_runs_per_minute``, ``max_concurrency``) apply
to them there: a run over a limit waits, it is never failed. A replay runs even while its job is
paused (an explicit request, as a manual trigger). A replay is not idempotent: calling it twice
starts two runs per original.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from punctual.config import DEFAULT_RETENTION_S
from punctual.errors import InvalidInput, InvalidTransition, TooManyRuns
from punctual.jobs.service import get_job
from punctual.model import TERMINAL_STATES, Job, JobStatus, Run, RunState, Trigger
from punctual.port import Queue, RunQuery, Store
from punctual.scheduling.planning import PlanOptions, dispatch_for, is_long_run, manual_run

MAX_REPLAY = 10_000  # runs one call may replay
MAX_REPLAY_JOBS = 100  # jobs one call may name
# jobs one call without job_ids may look in: each is one query (or more) of its runs in the range, and
# an API call must answer within API Gateway's 29 s (an owner with more names the jobs)
MAX_SCANNED_JOBS = 1_000
REPLAYABLE = TERMINAL_STATES  # runs that ended; an open run is still on its way
_PAGE = 1_000  # runs read per query
_CHUNK = 500  # runs inserted (and sent) per step
_INSERT_ROUNDS = 3  # instants tried for a replay whose first instant another run of the job holds


@dataclass(frozen=True, slots=True)
class ReplayQuery:
    """Which runs to replay: scheduled in ``[since, until)`` (epoch ms), ended in one of ``states``,
    of ``job_ids`` (None: every job of the owner that is not deleted)."""

    since: int
    until: int
    states: frozenset[RunState]
    job_ids: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Replayed:
    originals: list[Run]  # the runs that qualified, oldest scheduled first
    runs: list[Run]  # the runs started (empty on a dry run)


def replay_runs(
    store: Store,
    queue: Queue,
    owner: str,
    query: ReplayQuery,
    now: int,
    *,
    dry_run: bool = False,
    retention_s: int = DEFAULT_RETENTION_S,
    long_run_after_s: int | None = None,
) -> Replayed:
    """Replay the owner's runs that ``query`` selects (see the module docstring); on ``dry_run`` only
    find them. Raises :class:`InvalidInput` (the range or the states), :class:`JobNotFound` (a job
    named that is not the owner's), :class:`InvalidTransition` (a job named that is deleted) and
    :class:`TooManyRuns` (more than ``MAX_REPLAY``), each before anything is written."""
    _check(query)
    jobs = _jobs(store, owner, query.job_ids)
    originals = _qualifying(store, jobs, query)
    if dry_run or not originals:
        return Replayed(originals, [])
    options = PlanOptions(retention_s=retention_s)
    by_job: defaultdict[str, list[Run]] = defaultdict(list)
    for original in originals:
        by_job[original.job_id].append(original)
    started: list[Run] = []
    for job_id, runs in by_job.items():
        long_run = is_long_run(jobs[job_id].timeout_s, long_run_after_s)
        at = now  # this job's next free instant
        for chunk_start in range(0, len(runs), _CHUNK):
            inserted, at = _insert(store, owner, runs[chunk_start : chunk_start + _CHUNK], at, now=now, options=options)
            queue.send([dispatch_for(run, 0, now, long_run=long_run) for run in inserted])
            started.extend(inserted)
    return Replayed(originals, started)


def _check(query: ReplayQuery) -> None:
    if query.since >= query.until:
        raise InvalidInput("'from' must be before 'to'", field="to")
    if not query.states:
        raise InvalidInput("name at least one state", field="states")
    if not query.states <= REPLAYABLE:
        wrong = ", ".join(sorted(str(state) for state in query.states - REPLAYABLE))
        raise InvalidInput(f"only runs that ended can be replayed, not {wrong}", field="states")
    if query.job_ids is not None and len(query.job_ids) > MAX_REPLAY_JOBS:
        raise InvalidInput(f"name at most {MAX_REPLAY_JOBS} jobs", field="job_ids")


def _jobs(store: Store, owner: str, job_ids: Sequence[str] | None) -> dict[str, Job]:
    """The jobs to look in, by id: the owner's named jobs, or all of them but the deleted ones."""
    if job_ids is not None:
        named = {job_id: get_job(store, owner, job_id) for job_id in dict.fromkeys(job_ids)}
        deleted = [job_id for job_id, job in named.items() if job.status is JobStatus.DELETED]
        if deleted:
            raise InvalidTransition(f"job {deleted[0]} is deleted; its runs cannot be replayed", field="job_ids")
        return named
    jobs: dict[str, Job] = {}
    cursor: str | None = None
    while True:
        page = store.list_jobs(owner, limit=_PAGE, cursor=cursor)
        jobs.update((job.id, job) for job in page.items)
        if page.cursor is None:
            return jobs
        if len(jobs) >= MAX_SCANNED_JOBS:
            raise InvalidInput(
                f"this owner has more than {MAX_SCANNED_JOBS} jobs: name the jobs to replay (job_ids)", field="job_ids"
            )
        cursor = page.cursor


def _qualifying(store: Store, jobs: dict[str, Job], query: ReplayQuery) -> list[Run]:
    """The runs of ``jobs`` that ``query`` selects, oldest scheduled first; :class:`TooManyRuns` past the bound."""
    found: list[Run] = []
    for job_id in jobs:
        cursor: str | None = None
        while True:
            wanted = RunQuery(query.states, since=query.since, until=query.until - 1, limit=_PAGE, cursor=cursor)
            page = store.list_runs(job_id, wanted)
            found.extend(page.items)
            if len(found) > MAX_REPLAY:
                raise TooManyRuns(
                    f"more than {MAX_REPLAY} runs match; replay at most {MAX_REPLAY} per call "
                    "(narrow 'from' and 'to', the states or the jobs)",
                    field="to",
                )
            if page.cursor is None:
                break
            cursor = page.cursor
    return sorted(found, key=lambda run: (run.scheduled_at, run.job_id))


def _insert(
    store: Store, owner: str, originals: list[Run], at: int, *, now: int, options: PlanOptions
) -> tuple[list[Run], int]:
    """Insert one replay of each of ``originals`` (one job's), at instants from ``at`` on, a
    millisecond apart; an instant another run of the job holds is skipped (tried again further on,
    a few times). Returns the runs inserted and the next instant not tried."""
    inserted: list[Run] = []
    pending = list(originals)
    for _ in range(_INSERT_ROUNDS):
        runs = [_replay_of(original, owner, at + i, now, options) for i, original in enumerate(pending)]
        at += len(pending)
        flags = store.insert_runs(runs)
        inserted.extend(run for run, new in zip(runs, flags, strict=True) if new)
        pending = [original for original, new in zip(pending, flags, strict=True) if not new]
        if not pending:
            break
    return inserted, at


def _replay_of(original: Run, owner: str, scheduled_at: int, now: int, options: PlanOptions) -> Run:
    run = manual_run(original.job_id, owner, scheduled_at, options)
    return run.model_copy(update={"trigger": Trigger.REPLAY, "replay_of": original.run_id, "created_at": now})
