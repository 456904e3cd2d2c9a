"""One decision about the dependency graph: what it reads and what it writes (:meth:`Store.decide_edges`).

A decision is a check over jobs read from the store (the new upstreams exist and are not deleted,
their ancestors do not reach the job, the job being deleted has no live dependents) followed by the
write that the check allowed. Taken apart, two decisions can each pass their check against a graph
the other is about to change (A→B and B→A, each checked before the other was written). So the engine
takes the decision as one step: the reads are made through :class:`EdgeReads`, the write is an
:class:`EdgeChange`, and the write applies only if every read that the check relied on still holds.

What each read protects (the rules of ``punctual.dependencies.links``):

- ``EdgeReads.edges``: the ``depends_on`` of each job the cycle check walked (and the absence of
  each job it found absent). The write applies only if none of them changed.
- the written job's version: the write's own condition (as :meth:`Store.update_job`).
- the dependents of a job being deleted: every new dependent bumps its upstream's version
  (``EdgeChange.linked``), so the version condition of the delete covers them; the dependents
  themselves are plain reads (``EdgeReads.get_jobs``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from dataclasses import dataclass

from punctual.model import Job


class EdgeReads(ABC):
    """The reads of one decision, made through the engine that takes it (:meth:`Store.decide_edges`)."""

    @abstractmethod
    def edges(self, job_ids: Collection[str]) -> dict[str, Job]:
        """The jobs of ``job_ids`` that exist (any status), by id, read for their edges: the
        decision's write applies only while each one's ``depends_on`` is still as read, and each
        absent one is still absent or has no ``depends_on``."""

    @abstractmethod
    def get_jobs(self, job_ids: Collection[str]) -> dict[str, Job]:
        """Plain reads (:meth:`Store.get_jobs`), for what the write's own conditions cover: the
        written job's version, the dependents of a job being deleted."""

    @abstractmethod
    def dependents_of(self, upstream_id: str) -> list[str]:
        """:meth:`Store.dependents_of`, as seen by the decision."""


@dataclass(frozen=True, slots=True)
class EdgeChange:
    """The write of a decision: one job, and the reverse edges its ``depends_on`` implies."""

    # Stored as given, with version = expected_version + 1 (a create: as given).
    job: Job
    # None: create the job (JobAlreadyExists if its id exists); else the version the decision read.
    expected_version: int | None
    # Upstreams the job names now and did not before. Each gets the reverse edge, has_dependents and
    # a version bump (so a delete that read its dependents before is refused), and must exist and not
    # be deleted when the write applies.
    linked: tuple[str, ...] = ()
    # Upstreams the job no longer names (a deleted job: all of them): their reverse edges are removed.
    unlinked: tuple[str, ...] = ()
