"""What a dependent job waits for, and the dependency graph around a job (read-only views).

Both read only the owner's jobs: upstreams are the owner's by construction (``links``), and the
graph walk drops anything else, so no id of another owner can appear.
"""

from __future__ import annotations

from dataclasses import dataclass

from punctual.dependencies.links import MAX_GRAPH_JOBS, live_dependents
from punctual.errors import JobNotFound
from punctual.model import DependencyWhen, Job, Run
from punctual.port import ReleaseSlot, RunQuery, Store


@dataclass(frozen=True, slots=True)
class Waiting:
    """A dependent's progress towards its next run."""

    since: int  # the last release (or, before the first, when the job was created)
    waiting_for: list[str]  # upstream ids without a qualifying run since then
    satisfied: list[ReleaseSlot]  # upstream runs already collected for the next release


@dataclass(frozen=True, slots=True)
class Node:
    job: Job
    last_run: Run | None  # the run with the newest scheduled_at


@dataclass(frozen=True, slots=True)
class Edge:
    upstream_id: str
    dependent_id: str
    when: DependencyWhen


@dataclass(frozen=True, slots=True)
class Graph:
    job: Node
    upstream: list[Node]  # every job the job depends on, directly or not
    downstream: list[Node]  # every (not deleted) job that depends on it, directly or not
    edges: list[Edge]  # between the jobs above
    truncated: bool  # the walk stopped at MAX_GRAPH_JOBS jobs


def waiting(store: Store, job: Job) -> Waiting | None:
    """What ``job`` waits for (None for a job without ``depends_on``)."""
    if job.depends_on is None:
        return None
    state = store.get_release(job.id)
    slots = [s for s in (state.slot(u) for u in job.depends_on.jobs) if s is not None]
    have = {s.upstream_id for s in slots}
    since = job.created_at if state.released_at is None else state.released_at
    return Waiting(since, [u for u in job.depends_on.jobs if u not in have], slots)


def job_graph(store: Store, job: Job) -> Graph:
    """The jobs upstream and downstream of ``job`` (transitively) with their newest runs."""
    owner, budget = job.owner, MAX_GRAPH_JOBS
    edges: dict[tuple[str, str], Edge] = {}

    up: dict[str, Job] = {}
    frontier = [job]
    while frontier and len(up) < budget:
        current = frontier.pop()
        if current.depends_on is None:
            continue
        for upstream_id in current.depends_on.jobs:
            edges[(upstream_id, current.id)] = Edge(upstream_id, current.id, current.depends_on.when)
            if upstream_id in up or upstream_id == job.id:
                continue
            found = _owned(store, owner, upstream_id)
            if found is not None:
                up[upstream_id] = found
                frontier.append(found)

    down: dict[str, Job] = {}
    frontier = [job]
    while frontier and len(down) < budget:
        current = frontier.pop()
        if not current.has_dependents:
            continue
        for dependent in live_dependents(store, current.id):
            if dependent.owner != owner:
                continue
            assert dependent.depends_on is not None
            edges[(current.id, dependent.id)] = Edge(current.id, dependent.id, dependent.depends_on.when)
            if dependent.id not in down and dependent.id != job.id:
                down[dependent.id] = dependent
                frontier.append(dependent)

    known = {job.id, *up, *down}
    return Graph(
        job=_node(store, job),
        upstream=[_node(store, j) for j in up.values()],
        downstream=[_node(store, j) for j in down.values()],
        edges=[e for e in edges.values() if e.upstream_id in known and e.dependent_id in known],
        truncated=len(up) >= budget or len(down) >= budget,
    )


def _owned(store: Store, owner: str, job_id: str) -> Job | None:
    try:
        job = store.get_job(job_id)
    except JobNotFound:
        return None
    return job if job.owner == owner else None


def _node(store: Store, job: Job) -> Node:
    runs = store.list_runs(job.id, RunQuery(limit=1)).items
    return Node(job, runs[0] if runs else None)
