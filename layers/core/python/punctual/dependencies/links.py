"""Keeping ``depends_on`` valid and its reverse edges stored (used by ``punctual.jobs.service``).

Rules:
- Every upstream exists, belongs to the same owner and is not deleted; otherwise
  :class:`JobNotFound` with the same words for "absent" and "someone else's" (ids never leak).
- No cycle: the new upstreams' own upstreams, followed transitively, never reach the job.
- A job that live jobs depend on is deleted only with ``force`` (:class:`HasDependents`).
- The graph is acyclic at every moment, concurrent edits included: each check and the write it
  allowed are one decision (:meth:`Store.decide_edges`; ``punctual.port.edges``). The check reads
  through the decision's :class:`EdgeReads` and returns an :class:`EdgeChange`, which writes the job,
  its reverse edges and its new upstreams' ``has_dependents`` flag together. A decision that lost a
  race (:class:`ConcurrentModification`) is taken again on fresh reads, ``DECISION_ATTEMPTS`` times
  at most (:func:`decide`). No crash can leave a missing or an extra reverse edge.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Protocol

from punctual.errors import ConcurrentModification, DependencyCycle, InvalidInput, JobNotFound
from punctual.model import Job, JobStatus
from punctual.port import EdgeChange, EdgeReads, Store

MAX_GRAPH_JOBS = 1_000  # jobs a cycle check or a graph walk may read before refusing
DECISION_ATTEMPTS = 5  # decisions taken again after losing a race, before ConcurrentModification


class JobReads(Protocol):
    """What both a :class:`Store` and a decision's :class:`EdgeReads` can read."""

    def get_jobs(self, job_ids: Collection[str]) -> dict[str, Job]: ...

    def dependents_of(self, upstream_id: str) -> list[str]: ...


def decide(store: Store, owner: str, decision: Callable[[EdgeReads], EdgeChange | None]) -> Job | None:
    """:meth:`Store.decide_edges` of ``decision``, taken again on fresh reads when it lost a race.

    Returns what the store returns. Raises what ``decision`` raises, and :class:`ConcurrentModification`
    (HTTP 409) when the graph kept changing under it ``DECISION_ATTEMPTS`` times.
    """
    for _ in range(DECISION_ATTEMPTS - 1):
        try:
            return store.decide_edges(owner, decision)
        except ConcurrentModification:
            continue  # something the check read changed: check again, on what is there now
    try:
        return store.decide_edges(owner, decision)
    except ConcurrentModification:
        raise ConcurrentModification(
            f"the dependency graph kept changing while this change was checked ({DECISION_ATTEMPTS} attempts); "
            "read the jobs again and retry",
            field="depends_on",
        ) from None


def check_upstreams(
    reads: EdgeReads, owner: str, job_id: str, upstream_ids: Sequence[str], *, named_before: Collection[str] = ()
) -> None:
    """Every upstream exists, is the owner's and is not deleted, and none of the upstreams that are new
    (not in ``named_before``) reaches ``job_id``, directly or through their own upstreams.

    The new upstreams and every job the walk reads are read through ``reads.edges``: the decision holds
    only while their edges are as read. Upstreams named before are checked by a plain read (an edge
    that existed already cannot close a cycle, and whether they may be deleted was decided when they
    were: a delete refuses while they have dependents, unless forced).
    Raises :class:`JobNotFound` (field ``depends_on.jobs``), :class:`DependencyCycle` or
    :class:`InvalidInput` (a walk past ``MAX_GRAPH_JOBS`` jobs).
    """
    added = [u for u in upstream_ids if u not in named_before]
    kept = [u for u in upstream_ids if u in named_before]
    found = {**reads.get_jobs(kept), **reads.edges(added)}
    for upstream_id in upstream_ids:
        _owned(found.get(upstream_id), owner, upstream_id)
    if job_id in upstream_ids:
        raise DependencyCycle(f"job {job_id} cannot depend on itself", field="depends_on.jobs")
    seen: set[str] = set(added)
    level = [found[u] for u in added]
    while level:
        wanted: list[str] = []
        for job in level:
            if job.depends_on is None:
                continue
            if job_id in job.depends_on.jobs:
                raise DependencyCycle(
                    f"depends_on would make a cycle: {job.id} already depends (directly or not) on {job_id}",
                    field="depends_on.jobs",
                )
            wanted += [u for u in job.depends_on.jobs if u not in seen]
        wanted = list(dict.fromkeys(wanted))
        seen.update(wanted)
        if len(seen) > MAX_GRAPH_JOBS:
            raise InvalidInput(f"the dependency graph has more than {MAX_GRAPH_JOBS} jobs", field="depends_on.jobs")
        level = list(reads.edges(wanted).values()) if wanted else []  # absent jobs: no edges (still a read)


def live_dependents(reads: JobReads, upstream_id: str) -> list[Job]:
    """The jobs that depend on ``upstream_id`` now (not deleted, still naming it), by id."""
    ids = reads.dependents_of(upstream_id)
    found = reads.get_jobs(ids) if ids else {}
    return [
        job
        for job in (found.get(dependent_id) for dependent_id in ids)
        if job is not None
        and job.status is not JobStatus.DELETED
        and job.depends_on is not None
        and upstream_id in job.depends_on.jobs
    ]


def change_of(job: Job, expected_version: int | None, before: Iterable[str] = ()) -> EdgeChange:
    """The write of ``job`` (created when ``expected_version`` is None) that names ``job.depends_on``
    instead of ``before``; a deleted job names nothing any more (every edge is removed)."""
    old = set(before)
    now = set() if job.depends_on is None or job.status is JobStatus.DELETED else set(job.depends_on.jobs)
    return EdgeChange(job, expected_version, linked=tuple(sorted(now - old)), unlinked=tuple(sorted(old - now)))


def _owned(job: Job | None, owner: str, job_id: str) -> Job:
    if job is None or job.owner != owner or job.status is JobStatus.DELETED:
        raise JobNotFound(f"depends_on names no job {job_id}", field="depends_on.jobs")
    return job
