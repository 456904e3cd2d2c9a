"""Keeping ``depends_on`` valid and its reverse edges stored (used by ``punctual.jobs.service``).

Rules:
- Every upstream exists, belongs to the same owner and is not deleted; otherwise
  :class:`JobNotFound` with the same words for "absent" and "someone else's" (ids never leak).
- No cycle: the new upstreams' own upstreams, followed transitively, never reach the job.
- Reverse edges are written *before* the dependent job (create) or its new ``depends_on``
  (PATCH), and the upstream is marked ``has_dependents``; edges are removed *after* the job
  stops naming an upstream. A crash in between leaves an extra edge, which the release and the
  delete check ignore (they always read the dependent job), never a missing one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from punctual.errors import ConcurrentModification, DependencyCycle, InvalidInput, JobNotFound
from punctual.model import Job, JobStatus
from punctual.port import Store

MAX_GRAPH_JOBS = 1_000  # jobs a cycle check or a graph walk may read before refusing
_FLAG_ATTEMPTS = 5


def check_upstreams(store: Store, owner: str, job_id: str, upstream_ids: Sequence[str]) -> list[Job]:
    """The upstream jobs, each existing, the owner's and not deleted, and none of them reaching
    ``job_id`` (directly or through their own upstreams). Raises :class:`JobNotFound`
    (field ``depends_on.jobs``) or :class:`DependencyCycle`."""
    upstreams = [_owned(store, owner, upstream_id) for upstream_id in upstream_ids]
    if job_id in upstream_ids:
        raise DependencyCycle(f"job {job_id} cannot depend on itself", field="depends_on.jobs")
    seen: set[str] = set()
    frontier = list(upstreams)
    while frontier:
        job = frontier.pop()
        if job.id in seen:
            continue
        seen.add(job.id)
        if len(seen) > MAX_GRAPH_JOBS:
            raise InvalidInput(f"the dependency graph has more than {MAX_GRAPH_JOBS} jobs", field="depends_on.jobs")
        if job.depends_on is None:
            continue
        if job_id in job.depends_on.jobs:
            raise DependencyCycle(
                f"depends_on would make a cycle: {job.id} already depends (directly or not) on {job_id}",
                field="depends_on.jobs",
            )
        frontier += [j for u in job.depends_on.jobs if u not in seen and (j := _find(store, u)) is not None]
    return upstreams


def link(store: Store, dependent_id: str, upstreams: Iterable[Job]) -> None:
    """Store the reverse edges, then mark each upstream ``has_dependents`` (once, ever)."""
    upstreams = list(upstreams)
    if not upstreams:
        return
    store.link_dependent(dependent_id, [job.id for job in upstreams])
    for job in upstreams:
        _flag(store, job)


def unlink(store: Store, dependent_id: str, upstream_ids: Iterable[str], now: int) -> None:
    ids = sorted(set(upstream_ids))
    if ids:
        store.unlink_dependent(dependent_id, ids, now)


def live_dependents(store: Store, upstream_id: str) -> list[Job]:
    """The jobs that depend on ``upstream_id`` now (not deleted, still naming it), by id."""
    found = (_find(store, dependent_id) for dependent_id in store.dependents_of(upstream_id))
    return [
        job
        for job in found
        if job is not None
        and job.status is not JobStatus.DELETED
        and job.depends_on is not None
        and upstream_id in job.depends_on.jobs
    ]


def _owned(store: Store, owner: str, job_id: str) -> Job:
    job = _find(store, job_id)
    if job is None or job.owner != owner or job.status is JobStatus.DELETED:
        raise JobNotFound(f"depends_on names no job {job_id}", field="depends_on.jobs")
    return job


def _find(store: Store, job_id: str) -> Job | None:
    try:
        return store.get_job(job_id)
    except JobNotFound:
        return None


def _flag(store: Store, job: Job) -> None:
    """Set ``has_dependents`` on ``job`` (optimistic write; re-read when the scheduler moved it)."""
    for _ in range(_FLAG_ATTEMPTS):
        if job.has_dependents:
            return
        try:
            store.update_job(job.model_copy(update={"has_dependents": True}), job.version)
            return
        except ConcurrentModification:
            job = store.get_job(job.id)
    raise ConcurrentModification(f"job {job.id} kept changing; try again", field="depends_on.jobs")
