"""The gate in the lease path: a run over a limit waits; it never fails, never costs an attempt.

Every worker (the thread worker, a batched worker, the Lambda adapter) calls, per run::

    admission = gate.admit(owner, run_id, now, job=job)   before the lease
    ├─ not admitted: hide the message until admission.retry_at; the run is untouched
    │  (except its note and deadline, so the wait is visible and the reaper leaves it alone)
    └─ admitted ──> store.lease_run(...) ──> gate.settle(admission, lease outcome)
                                              ├─ not leased: the slots and the counted starts go back
                                              └─ leased: the run keeps its slots until
                                                 gate.release(owner, run_id, job) after its finish

A run starts under a list of *ceilings* (``punctual.tenancy.keyed``): its owner's own limits and
each keyed limit of its job, each kept in its own scope of the store's tenant records. Order of
the checks: whether every rate allows a start now (``rates.turn``: if not, the run gets its turn
there), then a slot of every ``max_concurrency`` (each can be given back), then the start is counted
under every rate (``rates.take``). A run a rate refuses never takes a slot, and a run refused a
slot never uses a start. A slot the run already held (a takeover after its worker died, or a
redelivery) is reused, never counted twice.

Priority (``Job.priority``, 0-9): a run refused a slot marks its priority as waiting in that scope
until it is back (``Store.mark_slot_wait``), and a run of lower priority does not take a free slot
of that scope while such a mark lasts (``SlotOutcome.YIELDED``): within one owner's runs, the
higher priority starts first. It never crosses owners (fairness between them is the queue's), and
a run of the highest waiting priority never yields.

When to come back: a rate-refused run gets its turn from the scope's rate record (at most a
minute ahead; see ``rates``), and its message is resent for that instant (``Admission.turn``). A
slot-refused run's message is hidden for a short jittered backoff (``SLOT_BACKOFF_MS``, growing
slowly with the receive count, except above the default priority), and the run takes its place in
the worker's line for that scope (``punctual.tenancy.handoff``, ``.line``): a slot the worker frees
is handed to the first in line, by priority then by how long it has waited, whose message is woken
at once; its mark ends when the last of its priority in line got its slot.

Leaks: a crash between taking a slot and leasing, or between finishing and releasing, leaves a
slot held by a run that does not run. :func:`repair_slots` (run by the reaper) frees every slot
whose run is not running under a live lease, in every scope; a worker killed mid-run keeps its slot
only until its run is taken over (the new attempt reuses that slot) or reaped. A crash between
counting a start and leasing leaves the start counted (the safe side of the ceiling).

Runs of owners without ``max_concurrency`` and ``max_runs_per_minute``, of jobs without ``limits``,
pass with no store access beyond the cached read of their owner's limits.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass

from punctual import ids
from punctual.clock import Clock
from punctual.config import Settings
from punctual.errors import InvalidId, RunNotFound
from punctual.model import Job, RunState
from punctual.model.limits import DEFAULT_PRIORITY, MIN_PRIORITY
from punctual.port import LeaseOutcome, SlotOutcome, Store
from punctual.tenancy import rates
from punctual.tenancy.handoff import HandOff, Refusals
from punctual.tenancy.keyed import Ceiling, keyed_ceilings, keyed_slot_scopes
from punctual.tenancy.limits import LimitCache, defaults_from

logger = logging.getLogger(__name__)

SLOT_BACKOFF_MS = 1_000  # first wait of a run refused a slot; grows by half per receive, up to the max
MAX_SLOT_BACKOFF_MS = 5_000
_RUN_OVER = frozenset({LeaseOutcome.FINISHED, LeaseOutcome.NOT_FOUND, LeaseOutcome.SKIPPED})  # it never runs again
_REFUSED = frozenset({SlotOutcome.FULL, SlotOutcome.YIELDED})


@dataclass(frozen=True, slots=True)
class Admission:
    owner: str
    run_id: str
    admitted: bool
    slots: tuple[tuple[str, SlotOutcome], ...] = ()  # (scope, outcome) of each slot taken or already held
    retry_at: int | None = None  # not admitted: when to try again (epoch ms)
    reason: str = ""  # not admitted: which limit, for the run's note and the logs
    counted: tuple[tuple[str, int], ...] = ()  # (scope, limit) of each rate the start was counted under
    at: int = 0  # when it was decided (epoch ms)
    turn: bool = False  # not admitted: retry_at is the run's turn of the rate, to come back at that very instant
    scope: str = ""  # refused a slot: the slot scope that refused it
    priority: int = DEFAULT_PRIORITY  # refused a slot: its job's priority (its place in that scope's line)

    @property
    def slot(self) -> SlotOutcome | None:
        """The slot of the owner's own ``max_concurrency`` (None: not limited by it)."""
        return next((outcome for scope, outcome in self.slots if scope == self.owner), None)

    @property
    def limited(self) -> bool:
        """The run passed a limit (a slot, or a counted start): it may have waited."""
        return bool(self.slots or self.counted)


class Gate(HandOff):
    """Applies each run's ceilings: its owner's ``max_concurrency`` and ``max_runs_per_minute``, and
    its job's keyed ``limits`` (``punctual.tenancy.keyed``), in its job's priority (module docstring)."""

    def __init__(self, store: Store, limits: LimitCache, clock: Clock, *, rng: random.Random | None = None) -> None:
        super().__init__(store)
        self.limits, self.clock = limits, clock
        self._rng = rng or random.Random()

    def ceilings(self, owner: str, job: Job | None = None) -> list[Ceiling]:
        """The ceilings a run of ``owner`` (and of ``job``, if given) starts under; empty: none."""
        limits = self.limits.get(owner)
        found = [Ceiling(owner, "", limits.max_concurrency, limits.max_runs_per_minute)] if limits.limits_starts else []
        return found + keyed_ceilings(job) if job is not None and job.limits else found

    def admit(
        self,
        owner: str,
        run_id: str,
        now: int,
        *,
        tries: int = 1,
        returning: bool = False,
        job: Job | None = None,
        seen: Refusals | None = None,
    ) -> Admission:
        """May ``run_id`` of ``owner`` be leased now? ``tries`` is how often its message was received
        (it lengthens the wait after a refused slot a little); ``returning``: the run waited before
        (back for its turn: a near miss keeps its place, ``rates.decide``). ``job``: the run's job,
        whose keyed limits apply too and whose priority orders the owner's runs for slots.

        ``seen``: the slot refusals of the caller's batch so far (:class:`Refusals`, filled here). A
        batch admitted highest priority first refuses the rest of a scope's runs of no higher
        priority the same way without asking the store again (but a run that holds a slot there
        already, a takeover: :meth:`Refusals.may_hold`): a backlog's knocks cost one slot request
        per scope and batch, not one per run."""
        ceilings = self.ceilings(owner, job)
        if not ceilings:
            return Admission(owner, run_id, admitted=True)
        priority = None if job is None else job.priority
        rated = [c for c in ceilings if c.max_runs_per_minute is not None]
        capped = [c for c in ceilings if c.max_concurrency is not None]
        if rated and capped:  # no slot taken for a run that must wait for its turn
            for ceiling in rated:
                assert ceiling.max_runs_per_minute is not None
                turn = rates.turn(self.store, ceiling.scope, ceiling.max_runs_per_minute, now, returning=returning)
                if turn is not None:
                    return _rate_refusal(owner, run_id, ceiling, turn)
        slots: list[tuple[str, SlotOutcome]] = []
        for ceiling in capped:
            assert ceiling.max_concurrency is not None
            rank = DEFAULT_PRIORITY if priority is None else priority
            # slots freed here and handed to runs ahead of this one in line are theirs (tenancy.line)
            free = ceiling.max_concurrency - self.line.woken_ahead(ceiling.scope, run_id, rank, now)
            local = self._refused_here(ceiling.scope, rank, priority=priority, free=free, now=now, seen=seen)
            if local is not None and (seen is None or not seen.may_hold(self.store, ceiling.scope, run_id)):
                slot = local
            else:  # the store decides (a run holding a slot already keeps it: ALREADY_HELD)
                slot = self.store.take_slot(ceiling.scope, run_id, free, now, priority=priority)
            if slot in _REFUSED:
                if seen is not None:
                    seen.refused[ceiling.scope] = (slot, rank)
                self._give_back(run_id, slots, ())
                return self._slot_refusal(owner, run_id, ceiling, slot, priority=priority, tries=tries, now=now)
            self._left_line(ceiling.scope, run_id, now)
            slots.append((ceiling.scope, slot))
        counted: list[tuple[str, int]] = []
        for ceiling in rated:
            assert ceiling.max_runs_per_minute is not None
            retry_at = rates.take(self.store, ceiling.scope, ceiling.max_runs_per_minute, now, returning=returning)
            if retry_at is not None:
                self._give_back(run_id, slots, counted, now)
                return _rate_refusal(owner, run_id, ceiling, retry_at)
            counted.append((ceiling.scope, ceiling.max_runs_per_minute))
        return Admission(owner, run_id, True, tuple(slots), counted=tuple(counted), at=now)

    def _refused_here(
        self, scope: str, rank: int, *, priority: int | None, free: int, now: int, seen: Refusals | None
    ) -> SlotOutcome | None:
        """The refusal of a slot of ``scope`` this worker can tell without asking the store, if any:
        a run of this batch of no lower priority was refused a moment ago, a run of higher priority
        waits in this worker's line, or the free slots are handed to runs ahead in line."""
        refused = None if seen is None else seen.refused.get(scope)
        if refused is not None and rank <= refused[1]:
            return refused[0]
        if priority is not None and self._yields(scope, priority, now):
            return SlotOutcome.YIELDED
        return SlotOutcome.FULL if free <= 0 else None

    def _slot_refusal(
        self,
        owner: str,
        run_id: str,
        ceiling: Ceiling,
        slot: SlotOutcome,
        *,
        priority: int | None,
        tries: int,
        now: int,
    ) -> Admission:
        """A run refused a slot waits a short jittered backoff (growing with its receives, except above
        the default priority), and marks its priority as waiting so that lower ones yield to it."""
        growth = 1.0 if priority is not None and priority > DEFAULT_PRIORITY else 1.5 ** max(0, tries - 1)
        back_at = now + int(min(SLOT_BACKOFF_MS * growth, MAX_SLOT_BACKOFF_MS) * self._rng.uniform(0.5, 1.0))
        if priority is not None and priority > MIN_PRIORITY:
            self._mark(ceiling.scope, priority, back_at)
        # one note for both (a yielding run finds the slots left to it taken): a note that changed
        # between knocks would be written again at every knock
        reason = f"{ceiling.name}max_concurrency {ceiling.max_concurrency} reached"
        rank = DEFAULT_PRIORITY if priority is None else priority
        return Admission(owner, run_id, False, (), back_at, reason, at=now, scope=ceiling.scope, priority=rank)

    def _give_back(
        self, run_id: str, slots: list[tuple[str, SlotOutcome]], counted: Sequence[tuple[str, int]], at: int = 0
    ) -> None:
        """Undo what an admission refused further on took: the starts it counted, the slots it took."""
        for scope, limit in counted:
            rates.give_back(self.store, scope, limit, at)
        for scope, slot in slots:
            if slot is SlotOutcome.TAKEN:
                self._free(scope, run_id)

    def limits_starts(self, owner: str, job: Job | None = None) -> bool:
        """Whether runs of ``owner`` (of ``job``, if given) wait for a slot or their turn when they start."""
        return bool(job is not None and job.limits) or self.limits.get(owner).limits_starts

    def settle(self, admission: Admission, outcome: LeaseOutcome) -> None:
        """After the lease: give back what a run that does not start now took.

        Leased: the run keeps its slots and its counted starts. Otherwise the starts go back
        (``rates.give_back``), and so does each slot if the run is over (finished, skipped by its
        overlap policy, or gone: also one left by a worker that died after its finish) or if this
        admission took it (a slot the run already held belongs to the worker holding the run).
        """
        if outcome is LeaseOutcome.LEASED:
            return
        for scope, limit in admission.counted:
            rates.give_back(self.store, scope, limit, admission.at)
        for scope, slot in admission.slots:
            if outcome in _RUN_OVER or slot is SlotOutcome.TAKEN:
                self._free(scope, admission.run_id)

    def holds_slots(self, owner: str) -> bool:
        """Whether ``owner``'s runs hold slots of its own ``max_concurrency``."""
        return self.limits.get(owner).max_concurrency is not None

    def slot_scopes(self, owner: str, job: Job | None = None) -> list[str]:
        """The scopes whose slots a run of ``owner`` (and ``job``) holds while it runs; empty: none."""
        keyed = [] if job is None else keyed_slot_scopes(job)
        return [owner, *keyed] if self.holds_slots(owner) else keyed

    def release(self, owner: str, run_id: str, job: Job | None = None) -> None:
        """After a finish (any state, retrying included): free the run's slots, if it holds any.

        Safe to call for any run (a run without a slot changes nothing), but for owners without
        ``max_concurrency`` and jobs without a keyed one it writes nothing at all.
        """
        for scope in self.slot_scopes(owner, job):
            self._free(scope, run_id)


def _rate_refusal(owner: str, run_id: str, ceiling: Ceiling, retry_at: int) -> Admission:
    reason = f"{ceiling.name}max_runs_per_minute {ceiling.max_runs_per_minute}"
    return Admission(owner, run_id, False, (), retry_at, reason, turn=True)


WAITING = "waiting: "  # a waiting run's note: "waiting: max_runs_per_minute 6"


def waiting_note(reason: str) -> str:
    """The note of a run that waits for ``reason`` (an :attr:`Admission.reason`)."""
    return f"{WAITING}{reason}"


def waited_for(note: str | None) -> str | None:
    """The reason a run's note says it waits for, or None if the note is not a wait's."""
    return note[len(WAITING) :] if note is not None and note.startswith(WAITING) else None


def gate_for(store: Store, settings: Settings, clock: Clock) -> Gate:
    """The gate of a worker: limits from the store over ``settings``' defaults, cached per owner."""
    return Gate(store, LimitCache(store, defaults_from(settings), clock), clock)


def repair_slots(store: Store, now: int, *, min_age_ms: int = 10_000) -> int:
    """Free slots held by runs that are not running under a live lease (leaks after a crash).

    Slots younger than ``min_age_ms`` are left alone: a run takes its slot just before its lease,
    so a young slot with a run still scheduled is a lease in progress, not a leak. Returns how many
    slots were freed. Reads one run per held slot of every owner holding slots.
    """
    freed = 0
    for owner in store.slot_owners():
        for run_id, taken_at in store.slot_holders(owner).items():
            if now - taken_at < min_age_ms or _runs_live(store, run_id, now):
                continue
            if store.release_slot(owner, run_id):
                freed += 1
                logger.info("freed the concurrency slot of %s (owner %s): its run is not running", run_id, owner)
    return freed


def _runs_live(store: Store, run_id: str, now: int) -> bool:
    try:
        job_id, scheduled_at = ids.parse_run_id(run_id)
        run = store.get_run(job_id, scheduled_at)
    except (InvalidId, RunNotFound):
        return False
    # a run cancelled under its attempt (overlap=replace, its job deleted) keeps the lease that
    # attempt held: its call may go on until its worker's next heartbeat finds the run cancelled; an
    # accepted run (completion callback) runs until its heartbeat deadline
    live = (RunState.RUNNING, RunState.CANCELLED, RunState.ACCEPTED)
    return run.state in live and (run.lease_expires_at or 0) >= now
