"""The embedded engine's dependency decisions (:meth:`Store.decide_edges`): one write transaction each.

The decision runs inside ``BEGIN IMMEDIATE``: its reads are made on this thread's connection, which
holds the write lock, so no other process or thread can change what it reads before its write
commits. The check and the write are then one step by construction, and nothing can refuse the
write as stale (no :class:`ConcurrentModification` from a race; only from a stale caller). The cost
is that writers wait for the check: a cycle check reads at most ``MAX_GRAPH_JOBS`` jobs, in
batches of a few hundred per query (milliseconds).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection

from punctual.engines.embedded.dependencies import DependencyRows
from punctual.engines.embedded.reads import BatchReads
from punctual.errors import ConcurrentModification
from punctual.model import Job
from punctual.port import EdgeChange, EdgeReads

# A new upstream: marked, and its version bumped (a delete that read its dependents earlier is refused).
_MARK_UPSTREAM = (
    "UPDATE jobs SET version = version + 1, doc = json_set(doc, '$.has_dependents', json('true'))"
    " WHERE job_id = ? AND status != 'deleted'"
)
_LINK = "INSERT INTO dependents VALUES (?, ?) ON CONFLICT DO NOTHING"
_UNLINK = "DELETE FROM dependents WHERE upstream_id = ? AND dependent_id = ?"


class EdgeDecisions(BatchReads, DependencyRows):
    """:meth:`Store.decide_edges` of :class:`~punctual.engines.embedded.store.EmbeddedStore`."""

    def decide_edges(self, owner: str, decide: Callable[[EdgeReads], EdgeChange | None]) -> Job | None:
        with self._db.write() as conn:
            change = decide(_Reads(self))  # reads on this connection: inside the transaction
            if change is None:
                return None
            job = change.job
            if job.owner != owner:
                raise ValueError(f"a decision for {owner} wrote a job of {job.owner}")
            if change.expected_version is None:
                self._insert_job(conn, job)
                stored = job
            else:
                stored = self._replace_job(conn, job, change.expected_version)
            for upstream_id in change.linked:
                if conn.execute(_MARK_UPSTREAM, (upstream_id,)).rowcount == 0:
                    raise ConcurrentModification(
                        f"upstream {upstream_id} is deleted or absent", field="depends_on.jobs"
                    )
            conn.executemany(_LINK, [(upstream_id, job.id) for upstream_id in change.linked])
            conn.executemany(_UNLINK, [(upstream_id, job.id) for upstream_id in change.unlinked])
            return stored

    # Provided by EmbeddedStore (the job row codec lives there).
    def _insert_job(self, conn: sqlite3.Connection, job: Job) -> None:
        raise NotImplementedError

    def _replace_job(self, conn: sqlite3.Connection, job: Job, expected_version: int) -> Job:
        raise NotImplementedError


class _Reads(EdgeReads):
    """Reads inside the decision's transaction: nothing they return can change before it commits,
    so reads for edges need no condition."""

    def __init__(self, store: EdgeDecisions) -> None:
        self._store = store

    def edges(self, job_ids: Collection[str]) -> dict[str, Job]:
        return self._store.get_jobs(job_ids)

    def get_jobs(self, job_ids: Collection[str]) -> dict[str, Job]:
        return self._store.get_jobs(job_ids)

    def dependents_of(self, upstream_id: str) -> list[str]:
        return self._store.dependents_of(upstream_id)
