"""The blocking half of the async worker: a batch of deliveries through the port, at once (up to
the leases here; their finishes in ``punctual.execution.batch_finish``).

The async worker (``punctual.execution.worker``) calls these on its engine thread pool,
never on its event loop. They apply the rules of ``punctual.execution.delivery`` (the per-message
protocol) to many messages per port call:

- :func:`hold`, before the runs' instant (a pre-lease): read their jobs, so that requests can be
  built and connections opened ahead; nothing is leased, no attempt counted.
- :func:`prepare`, at the runs' instant: read each job (or check those read by :func:`hold`),
  cancel the runs of deleted jobs, withdraw those of paused jobs or schedules that lost the
  instant, admit the rest through the owners' tenant limits (``punctual.tenancy.admission``: a
  run over its owner's max_concurrency or max_runs_per_minute waits, hidden, no attempt used),
  lease the admitted with one :meth:`Store.lease_runs`, and settle the messages of runs that
  were not leased (hidden while held or backing off, deleted as duplicates). This is the
  worker's lease path: per-owner limits and similar checks belong here, in one place. A lease
  is the beginning of an attempt: its call follows at once.
- after the targets answered, ``punctual.execution.batch_finish`` settles them (finish and
  acknowledge, dependents released, alerts, retry backoffs) and beats the leases of those still
  running.

Every step is safe to repeat: a batch that raises leaves its messages to come back after their
visibility timeout.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from punctual import ids, rules
from punctual.clock import Clock
from punctual.execution.changes import settle_owed
from punctual.execution.leasing import (
    cancel_orphan,
    hidden_until,
    lease_length_ms,
    may_have_waited,
    visibility_short,
    wait_all_for_limits,
    waited_before,
    withdrawal_of,
)
from punctual.execution.options import ExecutionOptions, Outcome
from punctual.execution.waits import Waits, parked
from punctual.metrics import Metrics
from punctual.model import DEFAULT_PRIORITY, Job, JobStatus, Run, copy_run
from punctual.port import Delivery, Finish, Hold, LeaseOutcome, LeaseRequest, Queue, Store
from punctual.runs import retry
from punctual.runs.alerts import Alerter
from punctual.tenancy.admission import Admission, Gate
from punctual.tenancy.handoff import Refusals
from punctual.tenancy.line import LAST_PLACE

logger = logging.getLogger(__name__)

_PROVISIONAL = Run(job_id="", scheduled_at=0, owner="", deadline_at=0, created_at=0)  # see provisional_run

Complete = Callable[[Sequence[Finish]], list[Run | None]]  # Engine.finish_and_ack, or a Lambda's variant


@dataclass(frozen=True, slots=True)
class Leased:
    """A run this worker leased, with what executing it needs."""

    delivery: Delivery
    job: Job
    run: Run
    lease_ms: int
    waited: str | None = None  # the tenant limit its start waited for (its attempt's log entry keeps it)

    @property
    def hold(self) -> Hold:
        return Hold(self.run.job_id, self.run.scheduled_at, self.run.worker_id or "", self.run.attempt)

    @property
    def may_execute(self) -> bool:
        """False when earlier attempts lost their workers and used up the retries (``rules.attempt_allowed``)."""
        return rules.attempt_allowed(self.run.attempt, self.job.max_retries)


@dataclass(slots=True)
class Prepared:
    leased: list[Leased] = field(default_factory=list)
    settled: list[tuple[Delivery, Outcome]] = field(default_factory=list)


@dataclass(slots=True)
class Holding:
    """Runs held for their instant (a pre-lease): nothing written, the messages' visibility is the
    reservation. ``jobs`` are their jobs as read now; the lease at the instant re-validates them."""

    deliveries: list[Delivery] = field(default_factory=list)
    jobs: dict[str, Job] = field(default_factory=dict)
    runs: dict[tuple[str, int], Run] = field(default_factory=dict)  # as read (LeaseRequest.seen)
    settled: list[tuple[Delivery, Outcome]] = field(default_factory=list)
    reserved: dict[str, Run] = field(default_factory=dict)  # receipt -> run reserved (execution.reserving)


@dataclass(frozen=True, slots=True)
class Port:
    """What the batch steps use: the store, the queue the messages came from, how finishes are
    acknowledged, and the worker's identity and options."""

    store: Store
    queue: Queue
    complete: Complete
    clock: Clock
    worker_id: str
    options: ExecutionOptions
    alerter: Alerter
    gate: Gate | None = None  # the owners' tenant limits (None: none applied)
    metrics: Metrics | None = None  # counts the dependent runs finished runs release (None: not counted)

    def owed(self, job: Job, run: Run, now: int) -> None:
        """What a terminal run owes before its message may go (``changes.settle_owed``)."""
        settle_owed(self.store, self.queue, self.alerter, job, run, now, options=self.options, metrics=self.metrics)


def hold(port: Port, deliveries: Sequence[Delivery]) -> Holding:
    """Before the runs' instant (a pre-lease): read their jobs once, so that their requests can be
    built and their connections opened ahead, and the runs themselves, so that the lease at the
    instant need not read them back (``LeaseRequest.seen``). The runs of deleted jobs are
    cancelled and their messages dropped; nothing else is written, and no attempt is counted: a
    worker that dies holding runs gives them back untouched (their messages come back after their
    visibility).
    """
    now = port.clock.now_ms()
    holding = Holding()
    parsed = [ids.parse_run_id(delivery.run_id) for delivery in deliveries]
    found = port.store.get_jobs([job_id for job_id, _ in parsed])
    drops: list[str] = []
    for delivery, (job_id, scheduled_at) in zip(deliveries, parsed, strict=True):
        job = found.get(job_id)
        if job is None or job.status is JobStatus.DELETED:
            outcome = cancel_orphan(port.store, job_id, scheduled_at, now)
            if outcome is Outcome.CANCELLED:
                drops.append(delivery.receipt)
            holding.settled.append((delivery, outcome))
            continue
        holding.deliveries.append(delivery)
        holding.jobs[job_id] = job
    if drops:
        port.queue.delete_many(drops)
    if holding.deliveries:
        holding.runs = port.store.get_runs([ids.parse_run_id(d.run_id) for d in holding.deliveries])
    return holding


def prepare(
    port: Port,
    deliveries: Sequence[Delivery],
    *,
    known: Mapping[str, Job] | None = None,
    seen: Mapping[tuple[str, int], Run] | None = None,
    defer_cover: bool = False,
) -> Prepared:
    """Lease the runs of ``deliveries`` (already parsed and due: see the async worker) in one batch,
    at their instant: each attempt begins with its lease.

    The jobs are read now, or, given ``known`` (read by :func:`hold` before the instant), checked
    with one read of their versions and re-read only where they changed: what the user committed
    before the instant decides it. A deleted job's run is cancelled; a paused job's, or one whose
    schedule lost the instant, is withdrawn (``LeaseRequest.withdrawn``: cancelled at its first
    lease, never called); the rest are admitted through the owners' tenant limits and leased for
    the lease their job asks now, with their messages hidden as long where needed.

    ``seen``: the runs as :func:`hold` read them (leased without being read back where unchanged).
    ``defer_cover``: the caller hides the leased runs' messages for their lease itself (:func:`cover`),
    once their calls are written: at the instant, the calls go first.

    Returns the leased runs, and the outcome of every delivery already settled here.
    """
    now = port.clock.now_ms()
    prepared = Prepared()
    parsed = [ids.parse_run_id(delivery.run_id) for delivery in deliveries]
    jobs = _jobs_now(port, [job_id for job_id, _ in parsed], known)
    requests: list[LeaseRequest] = []
    waiting: list[tuple[Delivery, Job, str | None]] = []  # with the limit each one waited for
    admissions: list[Admission | None] = []  # one per request: the gate's, for owners it limits
    drops: list[str] = []
    refused: list[tuple[Delivery, Admission]] = []  # runs over a limit: they wait (no attempt used)
    seen_full = Refusals()  # the slot refusals of this batch (Gate.admit)
    limited = _limited_owners(port, jobs.values())
    for delivery, (job_id, scheduled_at) in by_priority(deliveries, parsed, jobs, port.gate):
        job = jobs.get(job_id)
        if job is None:
            outcome = cancel_orphan(port.store, job_id, scheduled_at, now)
            if outcome is Outcome.CANCELLED:
                drops.append(delivery.receipt)
            prepared.settled.append((delivery, outcome))
            continue
        withdrawn = withdrawal_of(job, scheduled_at)
        admission = None
        # A withdrawn run passes the gate too: the lease withdraws only a run's first lease, so a
        # retry of a paused job's run still starts (its slot and start go back if it does not).
        if port.gate is not None and (job.owner in limited or job.limits):
            returning = may_have_waited(delivery, scheduled_at)
            admission = port.gate.admit(
                job.owner,
                delivery.run_id,
                now,
                tries=delivery.receive_count,
                returning=returning,
                job=job,
                seen=seen_full,
            )
            if not admission.admitted:  # it waits; its wait is written after the leases (wait_all_for_limits)
                refused.append((delivery, admission))
                prepared.settled.append((delivery, Outcome.THROTTLED))
                continue
        admissions.append(admission)
        lease_ms = lease_length_ms(job, port.options)
        read = None if seen is None else seen.get((job_id, scheduled_at))
        requests.append(LeaseRequest(job_id, scheduled_at, lease_ms, job.overlap, withdrawn, read))
        gated = admission is not None and admission.limited
        waiting.append((delivery, job, waited_before(port.store, delivery, scheduled_at) if gated else None))

    hides: defaultdict[int, list[str]] = defaultdict(list)
    waits = Waits(now, port.options)  # held by another worker, or backing off (punctual.execution.waits)
    results = port.store.lease_runs(requests, port.worker_id, now) if requests else []
    # From here on the leased runs' attempts have begun: nothing below may keep them from their calls
    # (a failure only leaves a slot, a message or a debt to be dealt with later: _after_leases).
    if port.gate is not None:  # a slot taken for a run that was not leased goes back
        gate = port.gate
        for admission, lease in zip(admissions, results, strict=True):
            if admission is not None:
                _after_leases("give back a concurrency slot", gate.settle, admission, lease.outcome)
        _after_leases("wake runs waiting for a slot", wake_waiters, port)
    for (delivery, job, waited), request, lease in zip(waiting, requests, results, strict=True):
        if lease.outcome is LeaseOutcome.LEASED and lease.run is not None:
            prepared.leased.append(Leased(delivery, job, lease.run, request.lease_ms, waited))
            if not defer_cover and visibility_short(request.lease_ms, port.options):  # hidden as long as the lease
                hides[retry.visibility_s(request.lease_ms)].append(delivery.receipt)
        elif lease.outcome in (LeaseOutcome.HELD, LeaseOutcome.NOT_READY):
            held = lease.outcome is LeaseOutcome.HELD
            waits.add(delivery, hidden_until(lease, now, port.options), job.owner, parked_run=parked(lease.run))
            prepared.settled.append((delivery, Outcome.HELD if held else Outcome.NOT_READY))
        elif lease.outcome is LeaseOutcome.SKIPPED:  # overlap=forbid, or withdrawn: cancelled, never called
            drops.append(delivery.receipt)
            prepared.settled.append((delivery, Outcome.SKIPPED))
        else:
            # a worker crashed between its finish and its release or alert: owed now, and the
            # message stays until that is done (it comes back after its visibility otherwise)
            if lease.run is None or _after_leases("settle what a finished run owes", port.owed, job, lease.run, now):
                drops.append(delivery.receipt)
            prepared.settled.append((delivery, Outcome.DUPLICATE))
    for visibility, receipts in hides.items():
        _after_leases("extend or hide messages", port.queue.extend_many, receipts, visibility)
    _after_leases("hide or re-send waiting messages", waits.apply, port.queue)
    if refused:  # after the leases: the admitted runs' calls never wait for the others' waits
        _after_leases("let the runs over a limit wait", _wait_for_limits, port, refused)
    if drops:
        _after_leases("delete messages", port.queue.delete_many, drops)
    return prepared


def _wait_for_limits(port: Port, refused: Sequence[tuple[Delivery, Admission]]) -> None:
    """Let the runs over a limit wait (``leasing.wait_all_for_limits``); those refused a slot whose
    messages now wait hidden take their place in the worker's line for it (``tenancy.line``)."""
    hidden = wait_all_for_limits(port.store, port.queue, port.clock, refused, options=port.options)
    if port.gate is not None:
        for delivery, admission in hidden:
            port.gate.line_up(admission, delivery.receipt, port.queue.name)


def wake_waiters(port: Port) -> None:
    """Hand the slots freed meanwhile over: the messages of the runs first in this worker's line for
    them turn visible now (``tenancy.line``; a wake that fails leaves them to come back on their own)."""
    if port.gate is None:
        return
    receipts = port.gate.take_wakes(port.queue.name, port.clock.now_ms())
    if receipts:
        port.queue.wake(receipts)


def cover(port: Port, leased: Sequence[Leased]) -> None:
    """Hide the messages of ``leased`` runs as long as their lease where their visibility may end
    first (:func:`prepare` with ``defer_cover``): right after their calls were written."""
    hides: defaultdict[int, list[str]] = defaultdict(list)
    for one in leased:
        if visibility_short(one.lease_ms, port.options):
            hides[retry.visibility_s(one.lease_ms)].append(one.delivery.receipt)
    for visibility, receipts in hides.items():
        port.queue.extend_many(receipts, visibility)


def _after_leases(what: str, step: Callable[..., object], *args: object) -> bool:
    """Run a step of :func:`prepare` that comes after the leases; False (logged) if it failed.

    Every such step is safe to leave undone: a message not extended comes back while its run is
    leased (another worker finds it held), a message not hidden or deleted comes back and is judged
    again, a slot not given back is repaired (``tenancy.admission.repair_slots``), a debt not paid
    is paid when the message comes back. Raising instead would leave the batch's leased runs
    without their calls: attempts counted for calls that never began.
    """
    try:
        step(*args)
    except Exception:
        logger.warning("after leasing a batch, could not %s; left for later", what, exc_info=True)
        return False
    return True


def _jobs_now(port: Port, job_ids: list[str], known: Mapping[str, Job] | None) -> dict[str, Job | None]:
    """The jobs of ``job_ids`` as they are now (None: gone or deleted). ``known`` (read earlier) are
    checked by their marks (status and version, one cheap read) and re-read only where changed."""
    if known is None:
        found = port.store.get_jobs(job_ids)
    else:
        wanted = {job_id: known[job_id].version for job_id in job_ids if job_id in known}
        marks = port.store.job_marks(wanted)
        changed = [
            job_id
            for job_id in dict.fromkeys(job_ids)
            if (mark := marks.get(job_id)) is None or mark.version != wanted.get(job_id)
        ]
        fresh = port.store.get_jobs(changed) if changed else {}
        found = {job_id: known[job_id] for job_id in wanted if job_id in marks and job_id not in fresh}
        found.update(fresh)
    return {job_id: job if job.status is not JobStatus.DELETED else None for job_id, job in found.items()}


def provisional_run(delivery: Delivery, job: Job) -> Run:
    """The run a held delivery names, as far as building its first attempt's request ahead needs
    (its id and scheduled time); never stored."""
    job_id, scheduled_at = ids.parse_run_id(delivery.run_id)
    # a copy of a template (~1 us); Run.model_construct inspects every default factory (~500 us)
    return copy_run(_PROVISIONAL, {"job_id": job_id, "scheduled_at": scheduled_at, "owner": job.owner})


def by_priority(
    deliveries: Sequence[Delivery],
    parsed: Sequence[tuple[str, int]],
    jobs: Mapping[str, Job | None],
    gate: Gate | None = None,
) -> list[tuple[Delivery, tuple[str, int]]]:
    """The batch in the order its runs pass the gate: higher job priority first; among equals, the
    runs in the worker's line for a slot by their places (``Gate.place``: a run handed a freed slot
    is not refused it for one behind it), then the queue's order (so within one batch the higher
    priority takes the free slots and starts first)."""
    pairs = list(zip(deliveries, parsed, strict=True))
    if gate is not None and len(gate.line):

        def rank(pair: tuple[Delivery, tuple[str, int]]) -> tuple[int, int]:
            job = jobs.get(pair[1][0])
            place = LAST_PLACE if job is None else gate.place(pair[0].run_id, gate.slot_scopes(job.owner, job))
            return -_priority(job), place

        pairs.sort(key=rank)  # stable
    elif any(job is not None and job.priority != DEFAULT_PRIORITY for job in jobs.values()):
        pairs.sort(key=lambda pair: -_priority(jobs.get(pair[1][0])))  # stable
    return pairs


def _priority(job: Job | None) -> int:
    return DEFAULT_PRIORITY if job is None else job.priority


def _limited_owners(port: Port, jobs: Iterable[Job | None]) -> frozenset[str]:
    """The owners of ``jobs`` whose runs wait for a slot or their turn when they start (the
    gate's cached limits, read once per owner per batch rather than once per run)."""
    gate = port.gate
    if gate is None:
        return frozenset()
    owners = {job.owner for job in jobs if job is not None}
    return frozenset(owner for owner in owners if gate.limits_starts(owner))
