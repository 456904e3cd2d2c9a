"""Named condition-expression parts: the rules of :mod:`punctual.rules`, spelled for DynamoDB.

Every conditional write of the ``aws`` engine is composed from the parts below, so each rule reads
like its documentation (the Powertools idempotency layer's style). ``#name`` placeholders stand for
attribute names that DynamoDB reserves (status, state, owner); ``:value`` placeholders are
filled by the store with each request's values.

Run lease timeline, with the condition that guards each arrow::

    (absent) ─RUN_NOT_EXISTS─> scheduled ─LEASABLE─> running(n, w) ─LEASE_HELD─> terminal | retrying
                               retrying ──LEASABLE──┘      │
                                                           └─TAKEOVER (expired, still n)─> running(n+1, w')

The parts are plain strings; :class:`Expression` collects SET/REMOVE clauses and their values and
derives ``ExpressionAttributeNames`` from the placeholders actually used (DynamoDB rejects unused ones).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# -- attribute names DynamoDB reserves -------------------------------------------------------------
NAMES: dict[str, str] = {"#status": "status", "#state": "state", "#owner": "owner"}

# -- jobs ------------------------------------------------------------------------------------------
JOB_NOT_EXISTS = "attribute_not_exists(job_id)"
VERSION_MATCHES = "version = :expected_version"  # also false when the job is absent (no version)
JOB_ACTIVE = "#status = :active"
NEXT_UNCHANGED = "next_run_at = :old_next"
# the seed's "UPDATE jobs SET next_run_at = :next WHERE id = :id AND next_run_at = :old" (and still active)
JOB_STILL_DUE = f"{JOB_ACTIVE} AND {NEXT_UNCHANGED}"

# -- runs: insert ----------------------------------------------------------------------------------
RUN_NOT_EXISTS = "attribute_not_exists(job_id)"
# a window marker (engines.aws.windows) still in the open index: closing it twice writes once
MARKER_OPEN = "attribute_exists(open_shard)"

# -- runs: lease (rules.lease_outcome) -------------------------------------------------------------
IS_SCHEDULED = "#state = :scheduled"
IS_RETRYING = "#state = :retrying"
IS_RUNNING = "#state = :running"
NO_BACKOFF = "attribute_not_exists(next_attempt_at)"
BACKOFF_ELAPSED = "next_attempt_at <= :now"
RETRY_READY = f"{IS_RETRYING} AND ({NO_BACKOFF} OR {BACKOFF_ELAPSED})"
# the common path of a lease: a fresh run, or a retry whose backoff has elapsed
# not reserved by another worker for its instant (rules.reserved_by_another)
NOT_RESERVED_BY_ANOTHER = "(attribute_not_exists(worker_id) OR worker_id = :worker OR lease_expires_at < :now)"
LEASABLE = f"({IS_SCHEDULED} AND {NOT_RESERVED_BY_ANOTHER}) OR ({RETRY_READY})"
# rules.reservable, at the attempt the worker read; rules.confirms
RESERVABLE = f"{IS_SCHEDULED} AND attempt = :seen_attempt AND {NOT_RESERVED_BY_ANOTHER}"
CONFIRMABLE = f"{IS_SCHEDULED} AND worker_id = :worker AND attempt = :seen_attempt"
# the confirm merged into the finish (Finish.confirm: the call was answered before its confirm went
# out): one write, under the same condition as the confirm it replaces (rules.confirms)
CONFIRMED_FINISH = CONFIRMABLE

# -- runs: takeover of an expired lease ------------------------------------------------------------
# Decided from the image the failed LEASABLE write returned; this compare-and-set makes sure nobody
# (the slow holder finishing, another worker taking over) moved the run since that image was read.
SAME_ATTEMPT_SEEN = "attempt = :seen_attempt"
SAME_LEASE_SEEN = "lease_expires_at = :seen_lease"
LEASE_EXPIRED = "lease_expires_at < :now"
TAKEOVER = f"{IS_RUNNING} AND {SAME_ATTEMPT_SEEN} AND {SAME_LEASE_SEEN} AND {LEASE_EXPIRED}"

# -- runs: holding the lease (rules.holds_lease) ---------------------------------------------------
# Expired or not: only a takeover (attempt + 1) fences the old worker out.
LEASE_HELD = f"{IS_RUNNING} AND worker_id = :worker AND attempt = :held_attempt"

# -- runs: a callback of an accepted attempt (rules.callback_open) --------------------------------
# The token's attempt, by the worker that leased it, running or accepted, its deadline not passed.
CALLBACK_OPEN = (
    "(#state = :running OR #state = :accepted) AND attempt = :token_attempt AND worker_id = :token_worker"
    " AND lease_expires_at >= :now"
)
CALLBACK_BEAT = f"{CALLBACK_OPEN} AND #state = :seen_state"  # a heartbeat keeps the state it read

# -- runs: compare-and-set on what the caller read (rules.unchanged_since) -------------------------
STATE_AS_READ = "#state = :read_state"
ATTEMPT_AS_READ = "attempt = :read_attempt"
LEASE_AS_READ = "lease_expires_at = :read_lease"
NO_LEASE_AS_READ = "attribute_not_exists(lease_expires_at)"


def unchanged_since(lease_was_set: bool) -> str:
    """The transition guard: same state, attempt, and lease end (or still no lease)."""
    lease = LEASE_AS_READ if lease_was_set else NO_LEASE_AS_READ
    return f"{STATE_AS_READ} AND {ATTEMPT_AS_READ} AND {lease}"


# -- shard leases (rules.may_acquire_shard / rules.acquired) ---------------------------------------
SHARD_UNLEASED = "attribute_not_exists(pk)"
SHARD_EXPIRED = "expires_at < :now"
SHARD_FREE = f"{SHARD_UNLEASED} OR {SHARD_EXPIRED}"  # taking it bumps the epoch
SHARD_OURS_LIVE = "#owner = :me AND expires_at >= :now"  # extending it keeps the epoch
SHARD_HELD = "#owner = :me AND epoch = :epoch"  # renew / release: same owner and fencing token
SHARD_HANDED_OVER = "#owner = :before AND epoch = :epoch"  # a successor takes it live (rules.succeeds)

# -- alerts ----------------------------------------------------------------------------------------
ALERT_NOT_EXISTS = "attribute_not_exists(pk)"

# -- run outcomes (punctual.port.outcomes) ---------------------------------------------------------
# a failure streak pauses the job it read, if nobody moved it since (pause_for_failures)
STILL_ACTIVE_AS_READ = f"{VERSION_MATCHES} AND {JOB_ACTIVE}"
NOTIFICATION_NOT_EXISTS = "attribute_not_exists(pk)"  # one notification per run
# a try is recorded on the notification as the deliverer read it (still pending, as many tries)
NOTIFICATION_AS_READ = "#state = :pending AND tries = :seen_tries"

# -- dependency decisions (punctual.port.edges; engines/aws/edges.py) ------------------------------
EDGES_AS_READ = "depends_on = :read_edges"  # the raw stored value the decision read
NO_EDGES_AS_READ = "attribute_not_exists(depends_on)"  # also true of a job that does not exist
JOB_EXISTS = "attribute_exists(job_id)"
NOT_DELETED = "#status <> :deleted"
LINKABLE = f"{JOB_EXISTS} AND {NOT_DELETED}"  # a job a new dependent may name
GRAPH_AS_READ = "seq = :seen_seq"  # the owner's graph sequence, for a decision too large to list
GRAPH_UNTOUCHED = "attribute_not_exists(seq)"


def edges_as_read(read_edges: object) -> str:
    """The condition that a job's ``depends_on`` is still the raw value read (None: still none)."""
    return NO_EDGES_AS_READ if read_edges is None else EDGES_AS_READ


# -- expression assembly ---------------------------------------------------------------------------

_NAME_TOKEN = re.compile(r"#[A-Za-z_][A-Za-z0-9_]*")


def names_in(*expressions: str | None) -> dict[str, str]:
    """``ExpressionAttributeNames`` for the ``#placeholders`` used in ``expressions`` (only those)."""
    used = {token for text in expressions if text for token in _NAME_TOKEN.findall(text)}
    return {token: NAMES[token] for token in sorted(used)}


def guarded(condition: str, **values: Any) -> dict[str, Any]:
    """PutItem arguments for ``condition`` alone (DynamoDB rejects empty or unused name/value maps)."""
    request: dict[str, Any] = {"ConditionExpression": condition}
    names = names_in(condition)
    if names:
        request["ExpressionAttributeNames"] = names
    if values:
        request["ExpressionAttributeValues"] = {f":{name}": value for name, value in values.items()}
    return request


@dataclass
class Expression:
    """An UpdateItem expression under construction: SET and REMOVE clauses plus their values."""

    sets: list[str] = field(default_factory=list)
    removes: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)

    def set(self, clause: str, **values: Any) -> Expression:
        """Add ``clause`` (e.g. ``"#state = :state"``); keyword values are named without the colon."""
        self.sets.append(clause)
        self.values.update({f":{name}": value for name, value in values.items()})
        return self

    def remove(self, *attributes: str) -> Expression:
        self.removes.extend(a for a in attributes if a not in self.removes)
        return self

    def update_expression(self) -> str:
        parts = []
        if self.sets:
            parts.append("SET " + ", ".join(self.sets))
        if self.removes:
            parts.append("REMOVE " + ", ".join(self.removes))
        return " ".join(parts)

    def request(self, condition: str, **condition_values: Any) -> dict[str, Any]:
        """UpdateItem arguments for this expression guarded by ``condition``."""
        update = self.update_expression()
        values = {**self.values, **{f":{name}": value for name, value in condition_values.items()}}
        request: dict[str, Any] = {
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        names = names_in(update, condition)
        if names:
            request["ExpressionAttributeNames"] = names
        return request
