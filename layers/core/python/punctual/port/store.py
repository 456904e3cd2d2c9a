"""The :class:`Store`: jobs, runs, shard leases, dependencies and tenants, as every engine stores them,
with its parts (``port.run_reads``, ``port.limit_waits``, ``port.outcomes``, ``port.alerts``,
``port.calendars``, ``port.callbacks``). See ``punctual.port`` for the rules every engine keeps."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sequence

from punctual.errors import JobNotFound, RunNotFound
from punctual.model import Job, JobStatus, Overlap, Run, Withdrawal
from punctual.port.alerts import AlertStore
from punctual.port.calendars import CalendarStore
from punctual.port.callbacks import CallbackStore
from punctual.port.edges import EdgeChange, EdgeReads
from punctual.port.limit_waits import LimitWaits
from punctual.port.outcomes import OutcomeStore
from punctual.port.records import (
    Advance,
    Beat,
    DueJob,
    Finish,
    JobMark,
    LeaseRequest,
    LeaseResult,
    Page,
    RateState,
    ReleaseSlot,
    ReleaseState,
    Reservation,
    RunChange,
    RunQuery,
    ShardLease,
    SlotOutcome,
    Tenant,
)
from punctual.port.run_reads import RunReads
from punctual.port.stats import OpenRuns, RunStats


class Store(RunReads, LimitWaits, OutcomeStore, AlertStore, CalendarStore, CallbackStore, ABC):
    """Jobs, runs, shard leases and more (the parts it inherits). Every conditional write of the
    system lives below this."""

    shards: int  # number of due-index shards this store was created with

    # -- jobs --------------------------------------------------------------------------------

    @abstractmethod
    def create_job(self, job: Job) -> None:
        """Insert a new job. Raises :class:`JobAlreadyExists` if a job with ``job.id`` exists.

        The job enters the due index iff ``job.status`` is active (then ``next_run_at`` must be set,
        except for a job with ``depends_on``: it is never due, its runs are released by its upstreams).
        """

    @abstractmethod
    def get_job(self, job_id: str) -> Job:
        """The job with this id, in any status. Raises :class:`JobNotFound`.

        Ownership is checked by the caller (``punctual.jobs.service``), which answers not-found for
        another owner's job so ids do not leak.
        """

    def get_jobs(self, job_ids: Collection[str]) -> dict[str, Job]:
        """The jobs of ``job_ids`` that exist (any status), by id: one step where the engine can
        (embedded: one query per few hundred ids; aws: BatchGetItem). Missing ids are left out."""
        found: dict[str, Job] = {}
        for job_id in dict.fromkeys(job_ids):
            try:
                found[job_id] = self.get_job(job_id)
            except JobNotFound:
                continue
        return found

    def get_runs(self, keys: Collection[tuple[str, int]]) -> dict[tuple[str, int], Run]:
        """The runs of ``keys`` (job_id, scheduled_at) that exist, by key, read strongly consistent:
        one step where the engine can (embedded: one query per few hundred keys; aws: BatchGetItem)."""
        found: dict[tuple[str, int], Run] = {}
        for job_id, scheduled_at in dict.fromkeys(keys):
            try:
                found[(job_id, scheduled_at)] = self.get_run(job_id, scheduled_at)
            except RunNotFound:
                continue
        return found

    def job_marks(self, job_ids: Collection[str]) -> dict[str, JobMark]:
        """:meth:`get_jobs` reduced to each job's status and version: whether a job read earlier
        is still the same definition (a worker checks this at a pre-leased run's instant)."""
        return {job_id: JobMark(job.status, job.version) for job_id, job in self.get_jobs(job_ids).items()}

    @abstractmethod
    def list_jobs(
        self, owner: str, *, status: JobStatus | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[Job]:
        """The owner's jobs, newest ``created_at`` first, optionally only those with ``status``.

        Deleted jobs are listed only when ``status`` is deleted. Raises :class:`InvalidCursor`.
        """

    @abstractmethod
    def update_job(self, job: Job, expected_version: int) -> Job:
        """Replace the stored job iff its version is still ``expected_version``.

        Writes ``job`` with ``version = expected_version + 1`` and ``updated_at`` as given, and
        puts it in or takes it out of the due index to match its status (pause, resume and delete
        are updates of the status; see ``punctual.jobs.lifecycle``). Returns the stored job.
        Raises :class:`ConcurrentModification` on a version mismatch, :class:`JobNotFound` if absent.
        """

    # -- claim ---------------------------------------------------------------------------------

    @abstractmethod
    def due_jobs(self, shard: int, until: int, limit: int, after: DueJob | None = None) -> list[DueJob]:
        """Active jobs of ``shard`` with ``next_run_at <= until``, oldest first, at most ``limit``.

        ``after`` continues a listing after that job (keyset on (next_run_at, job_id)). On the
        ``aws`` engine the index is eventually consistent: a listed job may already have moved on,
        which makes its :meth:`advance_jobs` fail (a counted conflict, not an error).
        """

    @abstractmethod
    def insert_runs(self, runs: Sequence[Run], *, window: bool = False) -> list[bool]:
        """Insert each run unless a run with the same (job_id, scheduled_at) exists.

        Returns one flag per run: True if this call inserted it, False if it existed (then the
        stored run is left untouched). Open runs enter the open-runs index (``window``: a claim
        window's runs of one job, which an engine may index together: ``engines.aws.windows``).
        """

    @abstractmethod
    def advance_jobs(self, advances: Sequence[Advance]) -> list[bool]:
        """Apply each advance iff the job is active and its ``next_run_at`` still equals
        ``expected_next_run_at`` (the seed's ``UPDATE jobs SET next_run_at = :next WHERE id = :id
        AND next_run_at = :old``). Returns one flag per advance: True if applied, False otherwise.
        """

    # -- runs ---------------------------------------------------------------------------------

    @abstractmethod
    def get_run(self, job_id: str, scheduled_at: int) -> Run:
        """The run for (job_id, scheduled_at). Raises :class:`RunNotFound`."""

    @abstractmethod
    def list_runs(self, job_id: str, query: RunQuery) -> Page[Run]:
        """The job's runs matching ``query``, newest scheduled_at first. Raises :class:`InvalidCursor`."""

    def lease_run(
        self,
        job_id: str,
        scheduled_at: int,
        worker_id: str,
        now: int,
        lease_ms: int,
        *,
        overlap: Overlap = Overlap.ALLOW,
        withdrawn: Withdrawal | None = None,
    ) -> LeaseResult:
        """Take the run for ``worker_id`` until ``now + lease_ms``.

        Qualifies: state scheduled; state retrying with ``next_attempt_at <= now``; or state
        running with ``lease_expires_at < now`` (a takeover: the lost attempt is recorded as
        ``lease_expired``). On success the state is running, ``attempt`` is incremented,
        ``started_at`` (first lease only) and ``deadline_at`` (= the lease end) are set.
        Otherwise the outcome says why (HELD, NOT_READY, FINISHED, NOT_FOUND) with the run as found.

        ``overlap`` is the job's policy, decided here, at the run's first lease (its instant), by
        the rules of ``punctual.rules`` (``overlap_*``): forbid with an earlier run still open ends
        the run cancelled (SKIPPED, never executed); replace cancels the open earlier runs first.

        ``withdrawn`` is what the caller read of the job at the run's instant (paused, or its
        schedule lost the instant): where ``rules.withdrawn`` applies to the run as stored (its
        first lease), the run ends cancelled instead (SKIPPED), never leased.
        """
        return self.lease_one(LeaseRequest(job_id, scheduled_at, lease_ms, overlap, withdrawn), worker_id, now)

    @abstractmethod
    def lease_one(self, request: LeaseRequest, worker_id: str, now: int) -> LeaseResult:
        """:meth:`lease_run` of one :class:`LeaseRequest` (what an engine implements; callers use
        :meth:`lease_run`, or :meth:`lease_runs` for a batch)."""

    @abstractmethod
    def heartbeat_run(self, job_id: str, scheduled_at: int, worker_id: str, attempt: int, lease_expires_at: int) -> Run:
        """Extend the caller's lease (and ``deadline_at``) to ``lease_expires_at``.

        Qualifies only while state is running with this ``worker_id`` and ``attempt``.
        Raises :class:`LeaseLost` otherwise.
        """

    @abstractmethod
    def finish_run(self, job_id: str, scheduled_at: int, worker_id: str, attempt: int, change: RunChange) -> Run:
        """Apply ``change`` iff the caller still holds the lease (state running, same worker_id and
        attempt), whether or not the lease has expired meanwhile: only a takeover (which increments
        the attempt) fences an old worker out. Raises :class:`LeaseLost` otherwise.
        """

    @abstractmethod
    def lease_runs(self, requests: Sequence[LeaseRequest], worker_id: str, now: int) -> list[LeaseResult]:
        """:meth:`lease_run` for each request, in one step where the engine can (embedded: one
        transaction; aws: concurrent conditional writes). One result per request, in order; each
        is decided by the same rules as a single lease, so a batch never changes what qualifies.
        """

    @abstractmethod
    def reserve_runs(self, reservations: Sequence[Reservation], worker_id: str, now: int) -> list[Run | None]:
        """Reserve each run for ``worker_id`` until its ``until`` where ``rules.reservable`` (scheduled,
        not reserved by another worker until after ``now``) and still at the attempt seen: the run
        stays scheduled, attempt unchanged; another worker's lease finds it HELD until then. One
        result per reservation: the run as reserved (``rules.reserved`` of the seen copy), or None.
        """

    @abstractmethod
    def heartbeat_runs(self, beats: Sequence[Beat]) -> list[bool]:
        """:meth:`heartbeat_run` for each beat, in one step where the engine can. One flag per beat:
        True if extended, False if the caller no longer holds that lease (it must abandon the attempt).
        """

    @abstractmethod
    def finish_runs(self, finishes: Sequence[Finish]) -> list[Run | None]:
        """:meth:`finish_run` for each finish, in one step where the engine can. One result per
        finish: the run after the change, or None if the lease was lost (:class:`LeaseLost` of a
        single finish). ``Finish.ack`` is ignored here (see :meth:`Engine.finish_and_ack`). A
        ``Finish.confirm`` needs the reservation instead of the lease (None: it was lost).
        """

    @abstractmethod
    def transition_run(self, current: Run, change: RunChange) -> Run:
        """Apply ``change`` iff the stored run still has ``current.state``, ``current.attempt`` and
        ``current.lease_expires_at`` (compare-and-set on what the caller read: the reaper, the
        dead-letter handler, overlap cancellation). Raises :class:`ConcurrentModification` otherwise.
        """

    @abstractmethod
    def past_deadline_runs(self, now: int, scheduled_before: int, limit: int) -> list[Run]:
        """Open runs with ``deadline_at < now`` and ``scheduled_at <= scheduled_before``.

        ``deadline_at`` is when an open run should have moved on: for scheduled runs the latest
        time a worker should have leased it, for running runs the lease end, for retrying runs
        the end of the backoff plus a grace. ``scheduled_before`` bounds how much of the open-runs
        index is read (runs younger than that are left to the queue's own redelivery).
        """

    @abstractmethod
    def purge_expired(self, now: int, deleted_before: int, limit: int) -> int:
        """Delete history past its retention: terminal runs whose ``expires_at`` (epoch seconds) is
        before ``now``, and deleted jobs last updated before ``deleted_before``; at most ``limit``
        rows. Returns how many were deleted. Engines whose storage expires items by itself
        (DynamoDB TTL on ``expires_at``) delete nothing here and return 0.
        """

    # -- stats --------------------------------------------------------------------------------

    @abstractmethod
    def run_stats(self, owner: str, since: int, until: int) -> RunStats | None:
        """The owner's runs that turned terminal in ``[since, until)`` (minute-aligned epoch ms),
        aggregated as :mod:`punctual.port.stats` defines: counts per minute and terminal state, and
        the start-lateness histogram. Computed by the engine without reading the runs one by one.

        None when the deployment keeps no run figures (the aws engine with
        ``Settings.stats_counters`` off: counting costs a write unit per run there).
        """

    @abstractmethod
    def open_runs(self, owner: str, now: int, at_most: int) -> OpenRuns | None:
        """How many of the owner's open runs are due (``scheduled_at <= now``), by waiting and
        executing (:class:`~punctual.port.stats.OpenRuns`), reading at most about ``at_most`` runs
        or index rows (beyond that the counts are lower bounds, ``complete=False``).

        None when the engine cannot count them (the aws engine without its ``open`` index).
        """

    # -- shard leases -------------------------------------------------------------------------

    @abstractmethod
    def acquire_shard(self, shard: int, owner: str, now: int, ttl_ms: int) -> ShardLease | None:
        """Take ``shard`` for ``owner`` until ``now + ttl_ms``.

        Qualifies if the shard has no lease, its lease expired (``expires_at < now``), ``owner``
        already holds it, or an earlier generation of ``owner`` holds it (``rules.succeeds``: the
        scheduler Lambda's hand-over). The epoch increases when the owner changes. None if held by another owner.
        """

    @abstractmethod
    def renew_shard(self, lease: ShardLease, now: int, ttl_ms: int) -> ShardLease | None:
        """Extend ``lease`` iff the shard still has the same owner and epoch. None if lost."""

    @abstractmethod
    def release_shard(self, lease: ShardLease) -> None:
        """Expire ``lease`` now iff it is still held with the same owner and epoch (no-op otherwise)."""

    @abstractmethod
    def shard_leases(self) -> list[ShardLease]:
        """Every shard lease ever written (expired ones included), by shard."""

    # -- dependencies (punctual.dependencies owns the rules) ----------------------------------

    @abstractmethod
    def decide_edges(self, owner: str, decide: Callable[[EdgeReads], EdgeChange | None]) -> Job | None:
        """Take one decision about ``owner``'s dependency graph as one step (``punctual.port.edges``).

        ``decide`` is called once: it reads through the :class:`EdgeReads` it is given, checks, and
        returns the write (None: nothing to write). The write (the job, its reverse edges, its new
        upstreams' ``has_dependents`` and versions) applies entirely, and only if everything the
        decision read through ``EdgeReads.edges`` is still as read; or not at all. Returns the stored
        job (None when ``decide`` returned None).

        Raises what ``decide`` raises; :class:`JobAlreadyExists` (a create whose id exists);
        :class:`JobNotFound` (an update of an absent job); :class:`ConcurrentModification` when the
        written job, a linked upstream or anything read through ``edges`` changed before the write
        (the caller decides again, on fresh reads).
        """

    @abstractmethod
    def link_dependent(self, dependent_id: str, upstream_ids: Sequence[str]) -> None:
        """Store the reverse edges ``upstream -> dependent`` (who depends on me); idempotent.
        (The service links through :meth:`decide_edges`; this is the edge write alone.)"""

    @abstractmethod
    def unlink_dependent(self, dependent_id: str, upstream_ids: Sequence[str], now: int) -> None:
        """Remove those reverse edges (absent ones are ignored); ``now`` dates a retired edge where
        the engine removes it later (DynamoDB TTL: no component may DeleteItem)."""

    @abstractmethod
    def dependents_of(self, upstream_id: str) -> list[str]:
        """The ids linked as dependents of ``upstream_id`` (one query), in id order. Stale edges
        (a dependent deleted or changed since) are possible; callers check the dependent job."""

    @abstractmethod
    def get_release(self, dependent_id: str) -> ReleaseState:
        """The dependent's release record (an empty one, generation 0, if none was written)."""

    @abstractmethod
    def fill_release(self, dependent_id: str, slot: ReleaseSlot) -> tuple[bool, ReleaseState]:
        """Record ``slot`` iff the record has no slot for ``slot.upstream_id`` and ``slot.finished_at``
        is after ``released_at`` (or nothing was released yet). Returns (applied, the record after
        the write, or as found when not applied)."""

    @abstractmethod
    def complete_release(self, state: ReleaseState, released_at: int) -> bool:
        """Clear the slots of ``state``, set ``released_at`` and increase the generation, iff the
        stored generation is still ``state.generation``. False if another caller released first."""

    # -- tenants (punctual.tenancy) -------------------------------------------------------------

    @abstractmethod
    def put_tenant(self, tenant: Tenant) -> None:
        """Create or replace the owner's tenant record (last writer wins: an operator's setting)."""

    @abstractmethod
    def get_tenant(self, owner: str) -> Tenant | None:
        """The owner's tenant record, or None if no operator ever set one."""

    @abstractmethod
    def list_tenants(self) -> list[Tenant]:
        """Every tenant record, by owner."""

    @abstractmethod
    def count_live_jobs(self, owner: str, at_most: int) -> int:
        """How many of the owner's jobs are active or paused (the jobs ``max_jobs`` bounds), counting
        no further than ``at_most`` (the caller only needs to know whether the limit is reached)."""

    @abstractmethod
    def take_slot(self, owner: str, run_id: str, limit: int, now: int, *, priority: int | None = None) -> SlotOutcome:
        """Give ``run_id`` one of the owner's (any slot scope's) ``limit`` concurrency slots.

        Qualifies if the run holds one already (ALREADY_HELD, nothing written) or fewer than ``limit``
        runs hold one (TAKEN). Otherwise FULL, nothing written. With a ``priority``: YIELDED, nothing
        written, while a :meth:`mark_slot_wait` of a higher priority lasts past ``now``."""

    @abstractmethod
    def mark_slot_wait(self, owner: str, priority: int, until: int) -> None:
        """A run of ``priority`` waits for one of the owner's slots until ``until`` (the later mark stays)."""

    @abstractmethod
    def release_slot(self, owner: str, run_id: str) -> bool:
        """Free the slot ``run_id`` holds. True if it held one; False (nothing written) otherwise."""

    @abstractmethod
    def slot_holders(self, owner: str) -> dict[str, int]:
        """The runs holding the owner's slots, each with when it took its slot (epoch ms)."""

    @abstractmethod
    def slot_owners(self) -> list[str]:
        """Every owner with at least one slot held (the reaper checks their holders)."""

    @abstractmethod
    def get_rate_state(self, owner: str) -> RateState | None:
        """The owner's ``max_runs_per_minute`` record, or None if none was written (or it was forgotten
        after it stopped mattering; see :meth:`put_rate_state`)."""

    @abstractmethod
    def put_rate_state(self, state: RateState) -> bool:
        """Write ``state`` iff the stored record is the one it was computed from: stored version
        ``state.version - 1``, or no record when ``state.version`` is 1 (compare-and-set). False,
        nothing written, otherwise. The record may be forgotten a minute after both of its instants
        (``next_at``, ``queue_end``) have passed: it then decides nothing a missing record would not.
        """
