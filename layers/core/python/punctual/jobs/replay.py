"""Replay: new runs for earlier ones (``POST /runs/replay``, ``punctual runs replay``), for one owner.

What qualifies: the owner's runs scheduled in ``[since, until)`` that ended in one of ``states``
(succeeded, failed, dead, cancelled: an open run is still running), of the jobs named, or of every
job of the owner that is not deleted (at most :data:`MAX_SCANNED_JOBS`: an owner with more names
them). Each job's runs in the range are read, filtered by state where the engine can (DynamoDB: a
filter on a query of the job's partition, so a wide range of a busy job reads all of it). At most
:data:`MAX_REPLAY` per call: beyond it the call is refused (:class:`TooManyRuns`) and nothing is
written, so a caller narrows the range, the states or the jobs; a dry run answers the same (it
lists what a replay would start, oldest first). Only runs scheduled before the request began
(``at``) qualify, so a request never replays its own replays (a keyed request carried on later
reads again with its first ``at``).

What a replay writes: one new run per original, trigger ``replay``, ``replay_of`` naming it, due at
once, inserted then sent, as a manual trigger's (a crash in between leaves runs the reaper finds
past their deadline and sends). Where: a run is keyed by its instant, so the replay of a job's
original of rank ``k`` (oldest scheduled first among that job's originals) is at ``at + k`` ms,
counting only milliseconds that are not whole seconds (a schedule's instants are whole seconds, so a
replay never takes the instant of a run the scheduler has yet to insert); an instant another run
holds is left for the same count from ``at + STRIDE_MS``, then ``at + 2 * STRIDE_MS``. The
same request at the same ``at`` therefore names the same runs, and a second insert of one is a no-op
on both engines: what makes a keyed replay safe to repeat (``punctual.jobs.replay_keys``).
Nothing else is special about them: they run through the workers' lease path like any run, so the
owner's limits (``max_runs_per_minute``, ``max_concurrency``) apply to them there: a run over a
limit waits, it is never failed. A replay runs even while its job is paused (an explicit request,
as a manual trigger). Without an ``Idempotency-Key`` a replay is not idempotent: calling it twice
starts two new runs per original.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from punctual.config import DEFAULT_RETENTION_S
from punctual.errors import InvalidInput, InvalidTransition, TooManyRuns
from punctual.jobs.service import get_job
from punctual.model import TERMINAL_STATES, Job, JobStatus, Run, RunState, Trigger
from punctual.port import Queue, RunQuery, Store
from punctual.scheduling.planning import PlanOptions, dispatch_for, is_long_run, manual_run, off_schedule

MAX_REPLAY = 10_000  # runs one call may replay
MAX_REPLAY_JOBS = 100  # jobs one call may name
# jobs one call without job_ids may look in: each is one query (or more) of its runs in the range, and
# an API call must answer within API Gateway's 29 s (an owner with more names the jobs)
MAX_SCANNED_JOBS = 1_000
REPLAYABLE = TERMINAL_STATES  # runs that ended; an open run is still on its way
_PAGE = 1_000  # runs read per query
_CHUNK = 500  # runs inserted (and sent) per step
_ROUNDS = 3  # instants tried for one replay: its own, then a stride later, twice
# between one replay's instants: more than a job's ranks (at most MAX_REPLAY ms, plus the whole
# seconds off_schedule steps over: 10,011 ms)
STRIDE_MS = 11_000
WINDOW_MS = _ROUNDS * STRIDE_MS  # a request's replays are scheduled in [at, at + WINDOW_MS)


@dataclass(frozen=True, slots=True)
class ReplayQuery:
    """Which runs to replay: scheduled in ``[since, until)`` (epoch ms), ended in one of ``states``,
    of ``job_ids`` (None: every job of the owner that is not deleted)."""

    since: int
    until: int
    states: frozenset[RunState]
    job_ids: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Found:
    """What a request selects: the jobs looked in (by id) and the runs that qualified, oldest first."""

    jobs: dict[str, Job]
    originals: list[Run]


@dataclass(frozen=True, slots=True)
class Replayed:
    originals: list[Run]  # the runs that qualified, oldest scheduled first (empty when answered from a key)
    runs: list[Run]  # the runs started by this call (empty on a dry run)
    count: int  # originals that have their replay now (a dry run: would have); keyed: whoever started it
    repeated: bool = False  # a keyed request answered with what an earlier one with its key did


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    retention_s: int = DEFAULT_RETENTION_S
    long_run_after_s: int | None = None  # Settings.long_run_after_s: which replays go as long runs


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
    found = find(store, owner, query, now)
    if dry_run or not found.originals:
        return Replayed(found.originals, [], len(found.originals))
    return start(store, queue, owner, found, now, now, options=ReplayOptions(retention_s, long_run_after_s))


def find(store: Store, owner: str, query: ReplayQuery, at: int) -> Found:
    """The jobs and runs ``query`` selects for a request that began at ``at`` (runs scheduled before
    it). Reads only; raises as :func:`replay_runs` does."""
    _check(query)
    jobs = _jobs(store, owner, query.job_ids)
    return Found(jobs, _qualifying(store, jobs, query, min(query.until, at)))


def start(  # noqa: PLR0917 - the request's parts, as find and the caller hold them
    store: Store,
    queue: Queue,
    owner: str,
    found: Found,
    at: int,
    now: int,
    *,
    options: ReplayOptions,
    resume: bool = False,
    beat: Callable[[], None] | None = None,
) -> Replayed:
    """Insert and send one replay of each of ``found.originals`` at the instants ``at`` names (see the
    module docstring). ``resume``: the request carries on after an earlier one with its key stopped,
    so the originals already replayed in the window are left out first (and counted). ``beat`` is
    called before each step (a keyed request renews its hold there, and raises to stop)."""
    plan = PlanOptions(retention_s=options.retention_s)
    by_job: defaultdict[str, list[Run]] = defaultdict(list)
    for original in found.originals:
        by_job[original.job_id].append(original)
    started: list[Run] = []
    count = 0
    for job_id, runs in by_job.items():
        long_run = is_long_run(found.jobs[job_id].timeout_s, options.long_run_after_s)
        done = set(store.replays_between(job_id, at, at + WINDOW_MS - 1).values()) if resume else set()
        pending = [(rank, run) for rank, run in enumerate(runs) if run.run_id not in done]
        count += len(runs) - len(pending)
        for round_ in range(_ROUNDS):
            missed: list[tuple[int, Run]] = []
            for low in range(0, len(pending), _CHUNK):
                if beat is not None:
                    beat()
                chunk = pending[low : low + _CHUNK]
                inserted, placed = _insert(
                    store, owner, chunk, at + round_ * STRIDE_MS, when=(now, plan), missed=missed
                )
                queue.send([dispatch_for(run, 0, now, long_run=long_run) for run in inserted])
                started.extend(inserted)
                count += len(inserted) + placed
            pending = missed
            if not pending:
                break
    return Replayed(found.originals, started, count)


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


def _qualifying(store: Store, jobs: dict[str, Job], query: ReplayQuery, until: int) -> list[Run]:
    """The runs of ``jobs`` that ``query`` selects and that were scheduled before ``until`` (at most
    the query's), oldest scheduled first; :class:`TooManyRuns` past the bound."""
    found: list[Run] = []
    if until <= query.since:
        return found
    for job_id in jobs:
        cursor: str | None = None
        while True:
            wanted = RunQuery(query.states, since=query.since, until=until - 1, limit=_PAGE, cursor=cursor)
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
    store: Store,
    owner: str,
    chunk: list[tuple[int, Run]],
    base: int,
    *,
    when: tuple[int, PlanOptions],
    missed: list[tuple[int, Run]],
) -> tuple[list[Run], int]:
    """Insert the replays of ``chunk`` (one job's originals, with their ranks) at ``base + rank``
    counted in milliseconds that are not whole seconds (``off_schedule``: never a scheduled instant).
    Returns the runs inserted here, and how many of the others are replays of the same originals
    already (another request with this key placed them); the originals whose instant another run
    holds are added to ``missed``."""
    now, plan = when
    runs = [_replay_of(original, owner, off_schedule(base, rank), now, plan) for rank, original in chunk]
    flags = store.insert_runs(runs)
    inserted = [run for run, new in zip(runs, flags, strict=True) if new]
    if len(inserted) == len(runs):
        return inserted, 0
    held = store.replays_between(runs[0].job_id, runs[0].scheduled_at, runs[-1].scheduled_at)
    placed = 0
    for entry, run, new in zip(chunk, runs, flags, strict=True):
        if not new and held.get(run.scheduled_at) == run.replay_of:
            placed += 1
        elif not new:
            missed.append(entry)
    return inserted, placed


def _replay_of(original: Run, owner: str, scheduled_at: int, now: int, options: PlanOptions) -> Run:
    run = manual_run(original.job_id, owner, scheduled_at, options)
    return run.model_copy(update={"trigger": Trigger.REPLAY, "replay_of": original.run_id, "created_at": now})
