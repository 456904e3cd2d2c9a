"""The gate in the lease path: a run over its owner's limits waits; it never fails, never costs an attempt.

Every worker (the thread worker, a batched worker, the Lambda adapter) calls, per run::

    admission = gate.admit(owner, run_id, now)        before the lease
    ├─ not admitted: hide the message until admission.retry_at; the run is untouched
    │  (except its note and deadline, so the wait is visible and the reaper leaves it alone)
    └─ admitted ──> store.lease_run(...) ──> gate.settle(admission, lease outcome)
                                              ├─ not leased: the slot and the counted start go back
                                              └─ leased: the run keeps its slot until
                                                 gate.release(owner, run_id) after its finish

Order of the checks: whether the rate allows a start now (``rates.turn``: if not, the run gets
its turn), then the concurrency slot (it can be given back), then the start is counted
(``rates.take``). A run the rate
refuses never takes a slot, and a run refused a slot never uses a start. A slot the run already
held (a takeover after its worker died, or a redelivery) is reused, never counted twice.

When to come back: a rate-refused run gets its turn from the owner's rate record (at most a
minute ahead; see ``rates``), and its message is resent for that instant (``Admission.turn``). A
slot-refused run's message is hidden for a short jittered backoff (``SLOT_BACKOFF_MS``, growing
slowly with the receive count), since nothing says when a slot frees.

Leaks: a crash between taking a slot and leasing, or between finishing and releasing, leaves a
slot held by a run that does not run. :func:`repair_slots` (run by the reaper) frees every slot
whose run is not running under a live lease; a worker killed mid-run keeps its slot only until its
run is taken over (the new attempt reuses that slot) or reaped. A crash between counting a start
and leasing leaves the start counted (the safe side of the ceiling).

Owners without ``max_concurrency`` and ``max_runs_per_minute`` pass with no store access beyond
the cached read of their limits.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass

from punctual import ids
from punctual.clock import Clock
from punctual.config import Settings
from punctual.errors import InvalidId, RunNotFound
from punctual.model import RunState
from punctual.port import LeaseOutcome, SlotOutcome, Store
from punctual.tenancy import rates
from punctual.tenancy.limits import LimitCache, defaults_from

logger = logging.getLogger(__name__)

SLOT_BACKOFF_MS = 1_000  # first wait of a run refused a slot; grows by half per receive, up to the max
MAX_SLOT_BACKOFF_MS = 5_000
_RUN_OVER = frozenset({LeaseOutcome.FINISHED, LeaseOutcome.NOT_FOUND, LeaseOutcome.SKIPPED})  # it never runs again


@dataclass(frozen=True, slots=True)
class Admission:
    owner: str
    run_id: str
    admitted: bool
    slot: SlotOutcome | None = None  # the slot taken (None: the owner has no max_concurrency)
    retry_at: int | None = None  # not admitted: when to try again (epoch ms)
    reason: str = ""  # not admitted: which limit, for the run's note and the logs
    counted: int | None = None  # admitted under max_runs_per_minute: the limit the start was counted under
    at: int = 0  # when it was decided (epoch ms)
    turn: bool = False  # not admitted: retry_at is the run's turn of the rate, to come back at that very instant

    @property
    def limited(self) -> bool:
        """The run passed a limit of its owner (a slot, or a counted start): it may have waited."""
        return self.slot is not None or self.counted is not None


class Gate:
    """Applies each owner's ``max_concurrency`` and ``max_runs_per_minute`` (see the module docstring)."""

    def __init__(self, store: Store, limits: LimitCache, clock: Clock, *, rng: random.Random | None = None) -> None:
        self.store, self.limits, self.clock = store, limits, clock
        self._rng = rng or random.Random()

    def admit(self, owner: str, run_id: str, now: int, *, tries: int = 1, returning: bool = False) -> Admission:
        """May ``run_id`` of ``owner`` be leased now? ``tries`` is how often its message was received
        (it lengthens the wait after a refused slot a little); ``returning``: the run waited before
        (back for its turn: a near miss keeps its place, ``rates.decide``)."""
        limits = self.limits.get(owner)
        if not limits.limits_starts:
            return Admission(owner, run_id, admitted=True)
        rate = limits.max_runs_per_minute
        if rate is not None and limits.max_concurrency is not None:  # no slot taken for a run that must wait
            turn = rates.turn(self.store, owner, rate, now, returning=returning)
            if turn is not None:
                return _rate_refusal(owner, run_id, rate, turn)
        slot = None
        if limits.max_concurrency is not None:
            slot = self.store.take_slot(owner, run_id, limits.max_concurrency, now)
            if slot is SlotOutcome.FULL:
                wait = min(SLOT_BACKOFF_MS * 1.5 ** max(0, tries - 1), MAX_SLOT_BACKOFF_MS)
                at = now + int(wait * self._rng.uniform(0.5, 1.0))
                return Admission(owner, run_id, False, slot, at, f"max_concurrency {limits.max_concurrency} reached")
        if rate is not None:
            refused = self._count_start(owner, run_id, rate, now, returning)
            if not refused.admitted:
                if slot is SlotOutcome.TAKEN:
                    self.store.release_slot(owner, run_id)
                return refused
        return Admission(owner, run_id, True, slot, counted=rate, at=now)

    def _count_start(self, owner: str, run_id: str, rate: int, now: int, returning: bool) -> Admission:
        """Count a start if the rate allows one now (admitted), else the run's turn (refused)."""
        retry_at = rates.take(self.store, owner, rate, now, returning=returning)
        if retry_at is None:
            return Admission(owner, run_id, True, counted=rate, at=now)
        return _rate_refusal(owner, run_id, rate, retry_at)

    def limits_starts(self, owner: str) -> bool:
        """Whether ``owner``'s runs wait for a slot or their turn when they start (cached limits)."""
        return self.limits.get(owner).limits_starts

    def settle(self, admission: Admission, outcome: LeaseOutcome) -> None:
        """After the lease: give back what a run that does not start now took.

        Leased: the run keeps its slot and its counted start. Otherwise the start goes back
        (``rates.give_back``), and so does the slot if the run is over (finished, skipped by its
        overlap policy, or gone: also one left by a worker that died after its finish) or if this
        admission took it (a slot the run already held belongs to the worker holding the run).
        """
        if outcome is LeaseOutcome.LEASED:
            return
        if admission.counted is not None:
            rates.give_back(self.store, admission.owner, admission.counted, admission.at)
        if admission.slot is not None and (outcome in _RUN_OVER or admission.slot is SlotOutcome.TAKEN):
            self.store.release_slot(admission.owner, admission.run_id)

    def holds_slots(self, owner: str) -> bool:
        """Whether ``owner``'s runs hold concurrency slots (:meth:`release` writes only for them)."""
        return self.limits.get(owner).max_concurrency is not None

    def release(self, owner: str, run_id: str) -> None:
        """After a finish (any state, retrying included): free the run's slot, if its owner is limited.

        Safe to call for any owner (a run without a slot changes nothing), but for owners without
        ``max_concurrency`` it writes nothing at all.
        """
        if self.holds_slots(owner):
            self.store.release_slot(owner, run_id)


def _rate_refusal(owner: str, run_id: str, rate: int, retry_at: int) -> Admission:
    return Admission(owner, run_id, False, None, retry_at, f"max_runs_per_minute {rate}", turn=True)


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
    return run.state is RunState.RUNNING and (run.lease_expires_at or 0) >= now
