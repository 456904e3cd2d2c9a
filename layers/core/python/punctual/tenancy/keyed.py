"""The ceilings a run starts under: its owner's own limits and its job's keyed ``limits``, alike.

The admission gate (``punctual.tenancy.admission``) applies a list of :class:`Ceiling`. Each one
is a *scope* of the store's tenant records (``Store.take_slot`` ... ``Store.put_rate_state``): the
owner's concurrency slots and rate record are kept under the owner, those of a keyed limit under
:func:`key_scope` of the owner and the resolved key. So a keyed limit is the per-tenant machinery
applied to another scope: the same compare-and-set writes, the same turns for waiting runs, and the
same repair by the reaper of slots whose runs no longer run (``admission.repair_slots`` walks every
scope with held slots). Jobs without ``limits`` add no ceiling, hence no read or write.

Keys are scoped to their owner (two owners' ``upstream-api`` are two ceilings). Runs of several jobs
whose keys resolve alike share one ceiling; when those jobs give it different numbers, each run is
held to its own job's number (one limit for a key is what users should give).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from punctual.model import Job, resolve_key
from punctual.model.bounds import truncate
from punctual.model.limits import MAX_RESOLVED_CHARS

KEY_SCOPE_PREFIX = "~limit:"  # never an owner's own scope: owners starting with "~" are "~sha256:" digests


@dataclass(frozen=True, slots=True)
class Ceiling:
    """One set of start limits of a run: where its records live, and how a wait names it."""

    scope: str  # the owner (its tenant limits), or a keyed scope (key_scope)
    name: str  # in a waiting note, before the limit: "" for the owner's own, "limit customer:42 " for a key
    max_concurrency: int | None = None
    max_runs_per_minute: int | None = None


def key_scope(owner: str, key: str) -> str:
    """The store scope of ``owner``'s resolved ``key``: a digest, so any owner and key fit a store key."""
    digest = hashlib.sha256(f"{owner}\n{key}".encode("utf-8", "surrogatepass")).hexdigest()
    return KEY_SCOPE_PREFIX + digest


def keyed_ceilings(job: Job) -> list[Ceiling]:
    """The job's ``limits`` resolved for its runs, one :class:`Ceiling` per distinct key (entries with
    the same key merge, the lower number of each kind winning). Empty for a job without limits."""
    if not job.limits:
        return []
    merged: dict[str, tuple[int | None, int | None]] = {}
    for limit in job.limits:
        key = resolve_key(limit.key, job.id, job.payload)
        concurrency, rate = merged.get(key, (None, None))
        merged[key] = (_lower(concurrency, limit.max_concurrency), _lower(rate, limit.max_runs_per_minute))
    return [
        Ceiling(key_scope(job.owner, key), f"limit {truncate(key, MAX_RESOLVED_CHARS)} ", concurrency, rate)
        for key, (concurrency, rate) in merged.items()
    ]


def keyed_slot_scopes(job: Job) -> list[str]:
    """The scopes whose slots a run of ``job`` holds while it runs (its keyed ``max_concurrency``)."""
    if not job.limits or all(limit.max_concurrency is None for limit in job.limits):
        return []
    return [c.scope for c in keyed_ceilings(job) if c.max_concurrency is not None]


def _lower(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)
