"""The ``aws`` engine's dependency decisions (:meth:`Store.decide_edges`): one TransactWriteItems each.

A decision (``punctual.port.edges``) reads through :class:`_Reads`, which keeps the raw stored
``depends_on`` of every job read for its edges, and its write becomes one transaction:

    action                                      condition
    Put the job's head                          its version as read (a create: no such job)
    Put the job's spec                          -  (:mod:`.job_items`)
    Update each new upstream:                   it exists, is not deleted, its depends_on is as read
      has_dependents, version + 1
    Put each new reverse edge                   -
    Update each dropped reverse edge:           -  (an absent edge becomes a retired stub: TTL)
      unlinked, expires_ttl
    ConditionCheck each other job read          its depends_on as read (or still none)
    Update the owner's graph sequence, seq + 1  -  (a decision too large to list: seq as read)
      (only a decision that adds edges)

The version bump of a new upstream: a delete of that upstream checked its dependents earlier, and
its write is conditioned on its version, so the bump refuses it (it is decided again, and then sees
the new dependent). The condition on ``depends_on``, not on the version, of each job the cycle check
walked: claims and unrelated edits change versions all the time and would refuse decisions they
cannot affect. The value compared is the raw attribute read, so no change of encoding can make a
stale value match.

Past one transaction (``MAX_TRANSACTION_ACTIONS``: 100 actions, each a distinct item): a cycle check
that read more jobs than the conditions fit is covered by the owner's graph sequence instead
(``pk = graph#<owner>``, ``sk = -``, ``seq``), read before the check's first read of edges. Every
decision that adds edges increments it (a plain increment: decisions that fit never conflict through
it, except as transactions in flight on one item at once, which DynamoDB cancels with
TransactionConflict and the caller retries). The large decision's transaction is conditioned on the
value read, so an edge added meanwhile anywhere in the owner's graph refuses it, and it is decided
again. Decisions that read no edges (a delete, a PATCH adding no upstream) never read the sequence.

A write with nothing to condition and no edge to move (a delete of a job without dependencies, a
PATCH of ``when`` only) is the job's two actions alone, as :meth:`Store.update_job` writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from punctual.engines.aws import conditions as c
from punctual.engines.aws import items as it
from punctual.engines.aws.dependencies import RETIRED_EDGE_TTL_S, DependencyItems, edge_key
from punctual.engines.aws.items import Item, Key, n, s
from punctual.engines.aws.jobs import DynamoJobs
from punctual.engines.aws.tables import MAX_TRANSACTION_ACTIONS
from punctual.errors import ConcurrentModification, JobAlreadyExists, JobNotFound, PunctualError
from punctual.model import Job, JobStatus
from punctual.port import EdgeChange, EdgeReads

GRAPH_PREFIX = "graph#"
_YES = {"BOOL": True}


class DynamoEdges(DynamoJobs, DependencyItems):
    """:meth:`Store.decide_edges` of :class:`~punctual.engines.aws.store.DynamoStore`."""

    def decide_edges(self, owner: str, decide: Callable[[EdgeReads], EdgeChange | None]) -> Job | None:
        reads = _Reads(self, owner)
        change = decide(reads)
        if change is None:
            return None
        job = change.job
        if job.owner != owner:
            raise ValueError(f"a decision for {owner} wrote a job of {job.owner}")
        stored = job
        if change.expected_version is not None:
            stored = job.model_copy(update={"version": change.expected_version + 1})
        actions = self.job_actions(stored, change.expected_version)
        for upstream_id in change.linked:
            actions.append(self._linked_upstream(upstream_id, reads.seen))
            actions.append({"Put": {"TableName": self.leases_table, "Item": edge_key(upstream_id, job.id)}})
        actions += [self._retired_edge(upstream_id, job.id, job.updated_at) for upstream_id in change.unlinked]
        written = {job.id, *change.linked}
        checks = [self._unchanged(job_id, raw) for job_id, raw in reads.seen.items() if job_id not in written]
        if len(actions) + len(checks) + 1 <= MAX_TRANSACTION_ACTIONS:
            actions += checks
            if change.linked:
                actions.append(self._graph_step(owner))
        else:  # too many jobs to condition one by one: the owner's graph sequence stands for them
            assert reads.sequence_read  # only reads of edges make checks
            actions.append(self._graph_step(owner, as_read=True, seen=reads.sequence))
        reasons = self._tables.transact(actions)
        if reasons is not None:
            raise _refusal(change, reasons)
        return stored

    # -- actions ---------------------------------------------------------------------------------------

    def _linked_upstream(self, upstream_id: str, seen: dict[str, Item | None]) -> dict[str, Any]:
        condition, values = c.LINKABLE, {"deleted": s(JobStatus.DELETED.value)}
        if upstream_id in seen:
            raw = seen[upstream_id]
            condition = f"{condition} AND {c.edges_as_read(raw)}"
            if raw is not None:
                values["read_edges"] = raw
        expr = c.Expression().set("has_dependents = :yes", yes=_YES).set("version = version + :one", one=n(1))
        update = expr.request(condition, **values)
        return {"Update": {"TableName": self.jobs_table, "Key": it.job_key(upstream_id), **update}}

    def _retired_edge(self, upstream_id: str, dependent_id: str, now: int) -> dict[str, Any]:
        update = {
            "UpdateExpression": "SET unlinked = :yes, expires_ttl = :ttl",
            "ExpressionAttributeValues": {":yes": _YES, ":ttl": n(it.ttl_seconds(now) + RETIRED_EDGE_TTL_S)},
        }
        return {"Update": {"TableName": self.leases_table, "Key": edge_key(upstream_id, dependent_id), **update}}

    def _unchanged(self, job_id: str, raw: Item | None) -> dict[str, Any]:
        values = {} if raw is None else {"read_edges": raw}
        guard = c.guarded(c.edges_as_read(raw), **values)
        return {"ConditionCheck": {"TableName": self.jobs_table, "Key": it.job_key(job_id), **guard}}

    def _graph_step(self, owner: str, *, as_read: bool = False, seen: int | None = None) -> dict[str, Any]:
        """The owner's graph sequence + 1; with ``as_read``, only while it is still ``seen``."""
        expr = c.Expression().set("seq = if_not_exists(seq, :zero) + :one", zero=n(0), one=n(1))
        update: dict[str, Any]
        if not as_read:
            update = {"UpdateExpression": expr.update_expression(), "ExpressionAttributeValues": expr.values}
        elif seen is None:
            update = expr.request(c.GRAPH_UNTOUCHED)
        else:
            update = expr.request(c.GRAPH_AS_READ, seen_seq=n(seen))
        return {"Update": {"TableName": self.leases_table, "Key": _graph_key(owner), **update}}

    def graph_sequence(self, owner: str) -> int | None:
        """The owner's graph sequence (None: no decision of this owner ever added an edge)."""
        item = self._tables.get(self.leases_table, _graph_key(owner))
        return None if item is None else it.get_n(item, "seq")


class _Reads(EdgeReads):
    """A decision's reads: each job read for its edges leaves its raw ``depends_on`` in ``seen``."""

    def __init__(self, store: DynamoEdges, owner: str) -> None:
        self._store = store
        self._owner = owner
        self.seen: dict[str, Item | None] = {}
        self.sequence: int | None = None  # the owner's graph sequence, read before the first edge
        self.sequence_read = False

    def edges(self, job_ids: Collection[str]) -> dict[str, Job]:
        if not job_ids:
            return {}
        if not self.sequence_read:
            self.sequence, self.sequence_read = self._store.graph_sequence(self._owner), True
        wanted = list(dict.fromkeys(job_ids))
        keys = [it.job_key(job_id) for job_id in wanted]
        items = self._store._tables.batch_get(self._store.jobs_table, keys, complete=True)
        found = {item["job_id"]["S"]: item for item in items}
        for job_id in wanted:
            item = found.get(job_id)
            self.seen.setdefault(job_id, None if item is None else item.get("depends_on"))
        return self._store._with_specs(found)

    def get_jobs(self, job_ids: Collection[str]) -> dict[str, Job]:
        return self._store.get_jobs(job_ids)

    def dependents_of(self, upstream_id: str) -> list[str]:
        return self._store.dependents_of(upstream_id)


def _graph_key(owner: str) -> Key:
    return {"pk": s(GRAPH_PREFIX + owner), "sk": s("-")}


def _refusal(change: EdgeChange, reasons: list[dict[str, Any]]) -> PunctualError:
    """Why DynamoDB cancelled the decision's transaction, as the port's error."""
    job = change.job
    own = reasons[0] if reasons else {}
    if own.get("Code") == "ConditionalCheckFailed":  # the job's own write (always the first action)
        if change.expected_version is None:
            return JobAlreadyExists(f"job {job.id} already exists", field="id")
        if not own.get("Item"):
            return JobNotFound(f"job {job.id} not found", field="job_id")
        return ConcurrentModification(f"job {job.id} changed since it was read; read it again", field="version")
    return ConcurrentModification(
        f"the dependency graph around job {job.id} changed while the change was checked; try again",
        field="depends_on",
    )
