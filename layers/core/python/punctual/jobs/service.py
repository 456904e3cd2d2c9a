"""The job service: what the API does to jobs, with no HTTP and no boto3 (pause, resume and delete:
``punctual.jobs.lifecycle``; runs: ``punctual.jobs.runs``).

Every function acts for one ``owner`` and takes ``now`` (epoch ms). Another owner's job or run is
reported as not found (never "forbidden"), so ids do not leak across tenants. Errors are the
domain's (``punctual.errors``); the API maps them to HTTP in one place.

Rules this module owns:
- Creating a job computes its first ``next_run_at``: the first cron fire strictly after ``now``,
  or ``run_at``, which must not be in the past (``RUN_AT_TOLERANCE_MS`` absorbs clock skew and
  network time between a client's "now" and ours).
- Idempotent create: the job id is derived from (owner, Idempotency-Key), so the create is one
  conditional insert. When the id exists, the same spec returns the stored job (a replay) and a
  different spec is :class:`IdempotencyKeyReused`. The key names that job for as long as its
  record exists (deleted jobs included, until their retention ends).
- Writes are optimistic (``version``); a write that loses a race re-reads and re-applies, a few
  times, then reports :class:`ConcurrentModification` (:func:`write_job`, which the lifecycle
  shares).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from punctual import ids
from punctual.clock import from_datetime
from punctual.dependencies import links
from punctual.errors import (
    ConcurrentModification,
    IdempotencyKeyReused,
    InvalidInput,
    InvalidTransition,
    JobAlreadyExists,
    JobNotFound,
    LimitExceeded,
)
from punctual.execution.targets.policy import TargetPolicy, check_target, check_url
from punctual.jobs import checks, secrets, validation
from punctual.model import MAX_TIMEOUT_S, Job, JobSpec, JobStatus
from punctual.port import EdgeChange, EdgeReads, Keys, Page, Store
from punctual.scheduling import cron as schedule

RUN_AT_TOLERANCE_MS = 1_000
WRITE_ATTEMPTS = 3  # optimistic-write retries before ConcurrentModification reaches the caller
STRICT_TARGETS = TargetPolicy()  # public addresses only: what the AWS deployment allows by default
_SCHEDULING_FIELDS = ("schedule", "timezone", "run_at", "depends_on")


@dataclass(frozen=True, slots=True)
class Created:
    job: Job
    replayed: bool  # True: an earlier request with the same Idempotency-Key created this job


# -- jobs -----------------------------------------------------------------------------------------


def create_job(
    store: Store,
    owner: str,
    spec: JobSpec,
    now: int,
    *,
    idempotency_key: str | None = None,
    policy: TargetPolicy = STRICT_TARGETS,
    keys: Keys | None = None,
    max_jobs: int | None = None,
    max_timeout_s: int = MAX_TIMEOUT_S,
) -> Created:
    """Create an active job for ``owner``; with ``idempotency_key``, at most one job per key.

    Raises :class:`InvalidInput` (``run_at`` in the past, a malformed key, a target the ``policy``
    refuses, a ``depends_on`` cycle), :class:`JobTooLarge`, :class:`JobNotFound` (an upstream in
    ``depends_on`` that is not the owner's) and :class:`IdempotencyKeyReused` (the key already
    created a job from a different spec), :class:`LimitExceeded` (the owner has ``max_jobs``
    live jobs, checked before anything is written; a replay of a keyed create still replays) and
    :class:`ConcurrentModification` (the dependency graph kept changing under the check).
    Nothing is written when it raises. A job with ``depends_on`` is created together with its
    reverse edges, in one decision with the check of its upstreams (``punctual.dependencies.links``).
    """
    check_target(spec.target, policy)
    if spec.notify is not None:  # the notify webhook goes where a target may (docs/api.md, Run outcomes)
        check_url(spec.notify.url, policy, "notify.url")
    sealed = secrets.seal_secrets(spec, owner, keys, stored=None)
    checks.check_size(sealed)
    checks.check_timeout(spec.timeout_s, max_timeout_s)
    job_id = checks.job_id_for(owner, idempotency_key)
    if max_jobs is not None and store.count_live_jobs(owner, max_jobs) >= max_jobs:
        existing = _find_job(store, job_id) if idempotency_key else None
        if existing is None:
            raise LimitExceeded(
                f"this owner has {max_jobs} active or paused jobs, its max_jobs; delete some first", field="max_jobs"
            )
        return _replay(existing, owner, spec, keys)
    try:
        next_run_at = first_run_at(spec, now)
    except InvalidInput:
        # A retry of a keyed create may arrive after its run_at passed: it is still a replay.
        existing = _find_job(store, job_id) if idempotency_key else None
        if existing is None:
            raise
        return _replay(existing, owner, spec, keys)
    job = Job(
        **_spec_fields(sealed),
        id=job_id,
        owner=owner,
        status=JobStatus.ACTIVE,
        next_run_at=next_run_at,
        due_shard=ids.shard_of(job_id, store.shards),
        created_at=now,
        updated_at=now,
        version=1,
    )
    try:
        if spec.depends_on is None:
            store.create_job(job)
        else:  # the upstreams' check and the create are one decision (punctual.dependencies.links)
            upstream_ids = spec.depends_on.jobs

            def created(reads: EdgeReads) -> EdgeChange:
                links.check_upstreams(reads, owner, job_id, upstream_ids)
                return links.change_of(job, None)

            links.decide(store, owner, created)
    except JobAlreadyExists:
        if idempotency_key is None:
            raise  # a random 128-bit id collided: let it surface rather than guess
        return _replay(store.get_job(job_id), owner, spec, keys)
    return Created(job, replayed=False)


def get_job(store: Store, owner: str, job_id: str) -> Job:
    """The owner's job, in any status (deleted jobs stay readable until their retention ends).

    Raises :class:`InvalidId` for a malformed id and :class:`JobNotFound` if there is no such job
    or it belongs to someone else.
    """
    ids.check_job_id(job_id)
    job = _find_job(store, job_id)
    if job is None or job.owner != owner:
        # One message for "absent" and "someone else's": the answer must not reveal which.
        raise JobNotFound(f"no job {job_id}", field="job_id")
    return job


def list_jobs(
    store: Store, owner: str, *, status: JobStatus | None = None, limit: int = 50, cursor: str | None = None
) -> Page[Job]:
    """The owner's jobs, newest first; deleted jobs only when ``status`` is deleted.

    Raises :class:`InvalidInput` for a limit outside 1..MAX_PAGE and :class:`InvalidCursor`.
    """
    checks.check_limit(limit)
    return store.list_jobs(owner, status=status, limit=limit, cursor=cursor)


def update_job(
    store: Store,
    owner: str,
    job_id: str,
    changes: Mapping[str, Any],
    now: int,
    *,
    policy: TargetPolicy = STRICT_TARGETS,
    keys: Keys | None = None,
    max_timeout_s: int = MAX_TIMEOUT_S,
) -> Job:
    """Apply a partial spec (JSON merge-patch semantics) and return the stored job.

    Each key of ``changes`` replaces that field; ``None`` resets it to its default (or removes
    ``schedule``/``run_at``). Nested objects (``target``, ``retry``) are replaced whole. The
    merged spec is validated as a whole. When the schedule, time zone or ``run_at`` change,
    ``next_run_at`` is recomputed (an active job moves to its new first time; a completed
    one-time job given a new ``run_at`` or a schedule becomes active again; a paused job stays
    paused). An empty ``changes`` is a read. Raises :class:`InvalidInput`, :class:`JobNotFound`,
    :class:`InvalidTransition` (a deleted job, even with no changes), :class:`ConcurrentModification`.
    """
    if not changes:  # nothing to change, but a deleted job is refused like any other change of it
        job = get_job(store, owner, job_id)
        _refuse_if_deleted(job)
        return job
    if isinstance(changes.get("timeout_s"), int):
        checks.check_timeout(changes["timeout_s"], max_timeout_s)
    if "depends_on" not in changes:
        return write_job(store, owner, job_id, lambda job: _patched(job, changes, now, policy, keys))
    ids.check_job_id(job_id)

    # The check of the new upstreams (existence, owner, cycles) and the write are one decision, which
    # also moves the reverse edges (punctual.dependencies.links).
    def patched(reads: EdgeReads) -> EdgeChange:
        before = owned_job(reads, owner, job_id)
        job = _patched(before, changes, now, policy, keys)
        named_before = [] if before.depends_on is None else before.depends_on.jobs
        if job.depends_on is not None:
            links.check_upstreams(reads, owner, job_id, job.depends_on.jobs, named_before=named_before)
        return links.change_of(job, before.version, named_before)

    stored = links.decide(store, owner, patched)
    assert stored is not None  # patched always writes
    return stored


# -- scheduling rules -----------------------------------------------------------------------------


def first_run_at(spec: JobSpec, now: int) -> int | None:
    """The first due time of a new (or rescheduled) spec: the next cron fire after ``now``, or
    ``run_at``; None for a job with ``depends_on`` (never due: its upstreams release its runs).
    Raises :class:`InvalidInput` (field ``run_at``) if ``run_at`` is in the past."""
    if spec.depends_on is not None:
        return None
    if spec.schedule is not None:
        return schedule.next_fire(spec.schedule, spec.timezone, now)
    assert spec.run_at is not None  # JobSpec guarantees exactly one of the two
    at = from_datetime(spec.run_at)
    if at < now - RUN_AT_TOLERANCE_MS:
        raise InvalidInput("run_at is in the past; give a future time with its UTC offset", field="run_at")
    return at


# -- writes -----------------------------------------------------------------------------------------


def write_job(store: Store, owner: str, job_id: str, change: Callable[[Job], Job | None]) -> Job:
    """Read the owner's job, apply ``change`` (None: nothing to write), write it conditionally on its
    version, and return the job as stored.

    ``change`` runs again on a fresh read when the write loses a race. Raises what :func:`get_job`
    and ``change`` raise, and :class:`ConcurrentModification` after ``WRITE_ATTEMPTS`` lost races.
    """
    for attempt in range(WRITE_ATTEMPTS):
        job = get_job(store, owner, job_id)
        updated = change(job)
        if updated is None:
            return job
        try:
            return store.update_job(updated, expected_version=job.version)
        except ConcurrentModification:
            if attempt == WRITE_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _refuse_if_deleted(job: Job) -> None:
    if job.status is JobStatus.DELETED:
        raise InvalidTransition(f"job {job.id} is deleted; it cannot be changed", field="status")


def _patched(job: Job, changes: Mapping[str, Any], now: int, policy: TargetPolicy, keys: Keys | None) -> Job:
    _refuse_if_deleted(job)
    merged = job.spec.model_dump()
    for name, value in changes.items():
        if value is None:
            merged.pop(name, None)  # merge-patch null: back to the default (or absent)
        else:
            merged[name] = value
    try:
        spec = JobSpec.model_validate(merged)
    except ValidationError as exc:
        raise validation.invalid_input(exc) from None
    if spec.target != job.target:
        check_target(spec.target, policy)
    if spec.notify is not None and spec.notify != job.notify:
        check_url(spec.notify.url, policy, "notify.url")
    spec = secrets.seal_secrets(spec, job.owner, keys, stored=job.target)
    checks.check_size(spec)
    update: dict[str, Any] = {**_spec_fields(spec), "updated_at": now}
    if any(getattr(spec, f) != getattr(job, f) for f in _SCHEDULING_FIELDS):
        update.update(_rescheduled(job, spec, now), rescheduled_at=now)
    return job.model_copy(update=update)


def _rescheduled(job: Job, spec: JobSpec, now: int) -> dict[str, Any]:
    """Status and next_run_at after a change of schedule, time zone or run_at."""
    next_run_at = first_run_at(spec, now)  # validates a new run_at even while paused
    if job.status is JobStatus.PAUSED:
        return {"next_run_at": None}
    return {"status": JobStatus.ACTIVE, "next_run_at": next_run_at}


# -- helpers ----------------------------------------------------------------------------------------


def owned_job(reads: EdgeReads, owner: str, job_id: str) -> Job:
    """The owner's job as a decision reads it (its version is the decision's write condition).
    Raises :class:`JobNotFound` (absent, or someone else's)."""
    job = reads.get_jobs([job_id]).get(job_id)
    if job is None or job.owner != owner:
        raise JobNotFound(f"no job {job_id}", field="job_id")
    return job


def _find_job(store: Store, job_id: str) -> Job | None:
    try:
        return store.get_job(job_id)
    except JobNotFound:
        return None


def _replay(existing: Job, owner: str, spec: JobSpec, keys: Keys | None) -> Created:
    if existing.owner != owner or _canonical(secrets.open_secrets(existing.spec, owner, keys)) != _canonical(spec):
        raise IdempotencyKeyReused(
            "this Idempotency-Key already created a job from a different request body "
            "(or that job has been changed since); use a new key for a new job",
            field="Idempotency-Key",
        )
    return Created(existing, replayed=True)


def _canonical(spec: JobSpec) -> str:
    """A spec as comparable text: run_at as an instant, so offsets that name the same time match."""
    data = spec.model_dump(mode="json")
    data["run_at"] = None if spec.run_at is None else from_datetime(spec.run_at)
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _spec_fields(spec: JobSpec) -> dict[str, Any]:
    """The spec's fields as attributes (nested models stay models, unlike model_dump)."""
    return {name: getattr(spec, name) for name in JobSpec.model_fields}
