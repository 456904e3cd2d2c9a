"""The values that cross the port: pages, claims, leases, run changes, shard leases, tenants,
alerts and release records (frozen dataclasses; the domain models are ``punctual.model``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, TypeVar

from punctual.model import AlertKind, Attempt, Catchup, JobStatus, Overlap, Run, RunState, Withdrawal
from punctual.model.limits import DEFAULT_PRIORITY
from punctual.model.timing import CRON_RULE, DstPolicy, JobCalendar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    cursor: str | None = None  # opaque; pass back to get the next page; None on the last page


@dataclass(frozen=True, slots=True)
class DueJob:
    """The small projection of a job that claiming needs (the due index carries exactly this)."""

    job_id: str
    owner: str
    next_run_at: int
    schedule: str | None
    timezone: str
    jitter_s: int
    overlap: Overlap
    catchup: Catchup
    max_backfill: int
    last_run_at: int | None
    due_shard: int
    # The job's timeout, where the engine routes long runs to a queue of their own (aws); None
    # where one queue serves every run (embedded), so claiming there reads nothing more.
    timeout_s: int | None = None
    # The job's DST policy and calendar (the due index's ``timing``, absent for the defaults).
    dst: DstPolicy = CRON_RULE
    calendar: JobCalendar | None = None
    run_at: int | None = None  # a one-time calendar job's own time (its next_run_at may be moved from it)
    priority: int = DEFAULT_PRIORITY  # the job's (the due index's ``timing``: its messages carry it)


@dataclass(frozen=True, slots=True)
class Advance:
    """Move a job past a claimed time: ``next_run_at`` from ``expected_next_run_at`` to ``next_run_at``.

    ``next_run_at=None`` completes the job (one-time job dispatched): status becomes completed and
    the job leaves the due index.
    """

    job_id: str
    expected_next_run_at: int
    next_run_at: int | None
    last_run_at: int
    now: int


@dataclass(frozen=True, slots=True)
class RunQuery:
    """Filters for listing one job's runs, newest ``scheduled_at`` first."""

    states: frozenset[RunState] = frozenset()  # empty: every state
    since: int | None = None  # scheduled_at >= since
    until: int | None = None  # scheduled_at <= until
    limit: int = 50
    cursor: str | None = None


class LeaseOutcome(StrEnum):
    LEASED = "leased"  # the caller now holds the run (state running, attempt incremented)
    HELD = "held"  # another worker holds a live lease: hide the message until it ends
    NOT_READY = "not_ready"  # retrying and its backoff has not elapsed: hide the message until then
    FINISHED = "finished"  # terminal: a duplicate delivery; delete the message
    NOT_FOUND = "not_found"  # no such run: delete the message
    SKIPPED = "skipped"  # overlap=forbid and an earlier run is still open: run cancelled, delete the message


@dataclass(frozen=True, slots=True)
class LeaseResult:
    outcome: LeaseOutcome
    run: Run | None  # the run after the lease (LEASED) or as found (others); None if NOT_FOUND


@dataclass(frozen=True, slots=True)
class RunChange:
    """What a finish/transition writes. Fields left None are not changed.

    ``append`` adds an attempt record to ``attempts`` (bounded by the engine to the newest
    ``MAX_ATTEMPTS_KEPT``). ``clear_lease`` removes worker_id and lease_expires_at; ``lease_until``
    (with ``clear_lease=False``) moves lease_expires_at there instead: an accepted attempt's deadline.
    """

    state: RunState
    now: int
    deadline_at: int
    append: Attempt | None = None
    finished_at: int | None = None
    next_attempt_at: int | None = None
    attempt: int | None = None
    note: str | None = None
    clear_lease: bool = True
    lease_until: int | None = None


@dataclass(frozen=True, slots=True)
class LeaseRequest:
    """One run a worker asks to lease in a batch (:meth:`Store.lease_runs`), for ``lease_ms``;
    ``overlap`` is its job's policy, decided at the run's first lease (see :meth:`Store.lease_run`)."""

    job_id: str
    scheduled_at: int
    lease_ms: int
    overlap: Overlap = Overlap.ALLOW
    # The job as the worker read it at the instant withdraws the run (paused, or its schedule lost
    # this instant): a first lease cancels the run instead (``rules.withdrawn``), never calls it.
    withdrawn: Withdrawal | None = None
    # The run as the caller read it earlier (a worker holding it for its instant). Where the stored
    # run is still scheduled at the same attempt, the engine may lease it without reading it back:
    # the result is ``rules.leased(seen, ...)``, which overwrites every field that may have changed.
    seen: Run | None = None
    # A confirm (needs ``seen``): lease only a run this worker reserved (``rules.confirms``: still
    # scheduled, reserved by it, at the attempt seen), else not at all (no other outcome is acted on).
    confirm: bool = False


@dataclass(frozen=True, slots=True)
class Reservation:
    """A run a worker reserves for its instant (:meth:`Store.reserve_runs`): held until ``until``
    (epoch ms), no attempt counted. ``seen`` is the run as the worker read it (scheduled)."""

    seen: Run
    until: int


@dataclass(frozen=True, slots=True)
class JobMark:
    """What identifies a job's definition cheaply: its status and version (:meth:`Store.job_marks`)."""

    status: JobStatus
    version: int


@dataclass(frozen=True, slots=True)
class Hold:
    """A lease the caller believes it holds: the run, the worker and the attempt it leased."""

    job_id: str
    scheduled_at: int
    worker_id: str
    attempt: int


@dataclass(frozen=True, slots=True)
class Beat:
    """Extend ``hold`` (and the run's ``deadline_at``) to ``lease_expires_at`` (:meth:`Store.heartbeat_runs`)."""

    hold: Hold
    lease_expires_at: int


@dataclass(frozen=True, slots=True)
class Finish:
    """Apply ``change`` under ``hold`` (:meth:`Store.finish_runs`); ``ack`` is the receipt of the run's
    message on the engine's dispatch queue, deleted with the finish by :meth:`Engine.finish_and_ack`
    iff the finish applied (None: the message is not touched).

    ``leased`` is the run as its lease returned it to the caller (the worker's copy), or None. While
    a worker holds an attempt, nothing but that worker's heartbeats writes the run (every other
    write changes its state, worker or attempt, which ends the hold), so an engine may return
    ``rules.apply_change(leased, change)`` for a change that clears the lease without reading the
    finished run back. It never decides whether the finish applies: the hold does.
    """

    hold: Hold
    change: RunChange
    ack: str | None = None
    leased: Run | None = None
    # The confirm merged into the finish (``execution.reserving``: the call was answered before its
    # confirm went out): applies iff the run is still reserved by the hold's worker at the attempt
    # before the hold's (``rules.confirms``), and writes ``rules.apply_change(leased, change)``
    # (``leased``, required: ``rules.leased`` of the run as reserved, at the attempt's start).
    confirm: bool = False


@dataclass(frozen=True, slots=True)
class ShardLease:
    shard: int
    owner: str
    epoch: int  # fencing token: increases every time the shard changes hands
    expires_at: int


@dataclass(frozen=True, slots=True)
class Tenant:
    """An owner's limits as an operator set them (``punctual tenants set``). None: the deployment's
    default from ``Settings`` applies (see ``punctual.tenancy.limits``). ``weight`` is the owner's
    share of the embedded queue's round-robin hand-out (1: an equal turn)."""

    owner: str
    max_jobs: int | None = None
    max_runs_per_minute: int | None = None
    max_concurrency: int | None = None
    api_requests_per_second: int | None = None
    weight: int = 1
    updated_at: int = 0


@dataclass(frozen=True, slots=True)
class RateState:
    """An owner's ``max_runs_per_minute`` record (``punctual.tenancy.rates`` decides; the store keeps it).

    ``next_at``: the theoretical instant of the next start (starts are spaced ``rates.interval_ms``
    apart); ``queue_end``: the turn handed to the last run told to wait; ``recent``: starts per
    epoch second over the last minute (for ``GET /limits`` and a limit change); ``limit``: the
    limit they were computed for; ``guard_until``: after a change of the limit, until when the
    starts of the last minute are also counted. ``version`` counts the writes: a write applies iff
    the stored record is still the one read (compare-and-set, see :meth:`Store.put_rate_state`).
    """

    owner: str
    limit: int
    next_at: int
    queue_end: int
    recent: dict[int, int] = field(default_factory=dict)
    guard_until: int = 0
    version: int = 0


class SlotOutcome(StrEnum):
    TAKEN = "taken"  # the run now holds one of its owner's concurrency slots
    ALREADY_HELD = "already_held"  # the run held a slot already (a takeover or a redelivery): no change
    FULL = "full"  # every slot is held by other runs: the run must wait
    YIELDED = "yielded"  # a slot is free, but a run of higher priority waits for one: the run must wait


@dataclass(frozen=True, slots=True)
class Alert:
    """An owner alert, recorded once per (run, kind): the run that needs attention, or that paused its job."""

    owner: str
    run_id: str
    job_id: str
    created_at: int
    reason: str
    kind: AlertKind = AlertKind.RUN

    @property
    def key(self) -> str:
        """What the engines store it under, per owner (once per key): the run id, and for another
        kind than RUN the run id and the kind (``run_...#job_paused``)."""
        return self.run_id if self.kind is AlertKind.RUN else f"{self.run_id}#{self.kind.value}"

    @classmethod
    def stored(cls, owner: str, key: str, job_id: str, created_at: int, reason: str) -> Alert:
        """The alert an engine stored under ``key`` (:attr:`key`)."""
        run_id, _, kind = key.partition("#")
        return cls(owner, run_id, job_id, created_at, reason, AlertKind(kind) if kind else AlertKind.RUN)


@dataclass(frozen=True, slots=True)
class ReleaseSlot:
    """An upstream run offered to a dependent's release: which run, and when it finished."""

    upstream_id: str
    run_id: str
    finished_at: int


@dataclass(frozen=True, slots=True)
class ReleaseState:
    """A dependent job's release record: one slot per upstream job that has a qualifying run since
    the last release. ``generation`` increases with every release (the compare-and-set token);
    ``released_at`` is the last release's instant (None before the first)."""

    dependent_id: str
    generation: int = 0
    released_at: int | None = None
    slots: tuple[ReleaseSlot, ...] = ()

    def slot(self, upstream_id: str) -> ReleaseSlot | None:
        return next((s for s in self.slots if s.upstream_id == upstream_id), None)
