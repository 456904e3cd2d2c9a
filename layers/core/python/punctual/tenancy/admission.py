"""The gate in the lease path: a run over its owner's limits waits; it never fails, never costs an attempt.

Every worker (the thread worker, a batched worker, the Lambda adapter) calls, per run::

    admission = gate.admit(owner, run_id, now)        before the lease
    ├─ not admitted: hide the message until admission.retry_at; the run is untouched
    │  (except its note and deadline, so the wait is visible and the reaper leaves it alone)
    └─ admitted ──> store.lease_run(...) ──> gate.settle(admission, lease outcome)
                                              └─ leased: the run keeps its slot until
                                                 gate.release(owner, run_id) after its finish

Order of the checks: the concurrency slot first (it can be given back), then the rate window (a
start counted cannot be). A slot the run already held (a takeover after its worker died, or a
redelivery) is reused, never counted twice.

Leaks: a crash between taking a slot and leasing, or between finishing and releasing, leaves a
slot held by a run that does not run. :func:`repair_slots` (run by the reaper) frees every slot
whose run is not running under a live lease; a worker killed mid-run keeps its slot only until its
run is taken over (the new attempt reuses that slot) or reaped.

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

SLOT_BACKOFF_MS = 1_000  # first wait of a run refused a slot; doubles per refusal (receive count)
MAX_SLOT_BACKOFF_MS = 16_000
RATE_SPREAD_MS = 2_000  # rate-refused runs come back spread over this much past the next window
_RUN_OVER = frozenset({LeaseOutcome.FINISHED, LeaseOutcome.NOT_FOUND, LeaseOutcome.SKIPPED})  # it never runs again


@dataclass(frozen=True, slots=True)
class Admission:
    owner: str
    run_id: str
    admitted: bool
    slot: SlotOutcome | None = None  # the slot taken (None: the owner has no max_concurrency)
    retry_at: int | None = None  # not admitted: when to try again (epoch ms)
    reason: str = ""  # not admitted: which limit, for the run's note and the logs


class Gate:
    """Applies each owner's ``max_concurrency`` and ``max_runs_per_minute`` (see the module docstring)."""

    def __init__(self, store: Store, limits: LimitCache, clock: Clock, *, rng: random.Random | None = None) -> None:
        self.store, self.limits, self.clock = store, limits, clock
        self._rng = rng or random.Random()

    def admit(self, owner: str, run_id: str, now: int, *, tries: int = 1) -> Admission:
        """May ``run_id`` of ``owner`` be leased now? ``tries`` is how often it was refused before
        (the message's receive count), which lengthens the wait after a refused slot."""
        limits = self.limits.get(owner)
        if not limits.limits_starts:
            return Admission(owner, run_id, admitted=True)
        slot = None
        if limits.max_concurrency is not None:
            slot = self.store.take_slot(owner, run_id, limits.max_concurrency, now)
            if slot is SlotOutcome.FULL:
                wait = min(SLOT_BACKOFF_MS * 2 ** max(0, tries - 1), MAX_SLOT_BACKOFF_MS)
                at = now + int(wait * self._rng.uniform(0.5, 1.5))
                return Admission(owner, run_id, False, slot, at, f"max_concurrency {limits.max_concurrency} reached")
        if limits.max_runs_per_minute is not None:
            window_at = rates.take(self.store, owner, limits.max_runs_per_minute, now)
            if window_at is not None:
                if slot is SlotOutcome.TAKEN:
                    self.store.release_slot(owner, run_id)
                at = window_at + int(self._rng.uniform(0, RATE_SPREAD_MS))
                return Admission(owner, run_id, False, None, at, f"max_runs_per_minute {limits.max_runs_per_minute}")
        return Admission(owner, run_id, True, slot)

    def limits_starts(self, owner: str) -> bool:
        """Whether ``owner``'s runs wait for a slot or a rate window when they start (cached limits)."""
        return self.limits.get(owner).limits_starts

    def settle(self, admission: Admission, outcome: LeaseOutcome) -> None:
        """After the lease: give back a slot the run does not use.

        Leased: the run keeps it. Finished, skipped (overlap) or gone: the slot goes (also one left
        by a worker that died after its finish). Held by another worker or not ready: the slot goes only if this
        admission took it (a slot the run already held belongs to the worker holding the run).
        """
        if admission.slot is None or outcome is LeaseOutcome.LEASED:
            return
        if outcome in _RUN_OVER or admission.slot is SlotOutcome.TAKEN:
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
