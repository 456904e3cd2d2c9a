"""The deployed worker in the simulation: the async worker's steps (``punctual.execution.batch``) on
events of simulated time, as ``punctual.execution.worker.Worker`` runs them on its event loop.

A worker receives a batch, hides the far-too-early, and for each group of runs sharing an instant
either pre-leases them (their instant is still ahead: ``prelease``) and comes back at the instant,
or leases them now. A leased run's call begins at once; its target answers at once, or (a
``long`` call) after a while within its timeout, heartbeating meanwhile, or (a ``stall``) the
worker process stalls: no heartbeat until the call ends long after its lease. The batch steps
and the heartbeats go through the faulty store and queue, so a ``Crash`` can come at any of
them: the process dies with everything it held (pending events, calls in flight), and comes
back as a new process with a new worker id.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from punctual import ids
from punctual.errors import PunctualError
from punctual.execution import batch, batch_finish, reserving
from punctual.execution.targets.types import TargetResult, timed_out
from punctual.port import Delivery
from punctual.runs.alerts import LogAlerter
from tests.faults.injection import Crash, SkewedClock
from tests.faults.promises import Call, key_ceilings

if TYPE_CHECKING:
    from tests.faults.chaos import Simulation

SECOND = 1_000


@dataclass
class InFlight:
    leased: batch.Leased
    call: Call
    started: int  # worker clock
    stalled: bool
    duration: int = 0
    confirm: bool = False  # a reserved call whose attempt its finish confirms (Done.confirm)
    awaiting_confirm: bool = False  # a reserved call whose confirm is planned: answered first, its finish confirms it


class SimWorker:
    """Worker ``index``: its clock, its process incarnation, what it holds."""

    def __init__(self, sim: Simulation, index: int, clock: SkewedClock, *, prelease: bool) -> None:
        self.sim, self.index, self.clock, self.prelease = sim, index, clock, prelease
        self.incarnation = 0
        self.in_flight: list[InFlight] = []
        self.held: dict[str, int] = {}  # job id -> instant, of runs held for their instant
        # instant -> what every receive held for it: one instant task takes them all (Worker._join_instant)
        self.instants: dict[int, batch.Holding] = {}
        self.starting: dict[str, str] = {}  # run id -> the one receipt it is started from (Holding._claim_starts)

    def holding(self) -> list[str]:
        now = self.clock.now_ms()
        return [job_id for job_id, at in self.held.items() if at > now]

    @property
    def worker_id(self) -> str:
        return f"worker-{self.index}.{self.incarnation}"

    def port(self) -> batch.Port:
        return batch.Port(
            store=self.sim.store,  # type: ignore[arg-type]
            queue=self.sim.queue,  # type: ignore[arg-type]
            complete=self.sim.finish_and_ack,
            clock=self.clock,
            worker_id=self.worker_id,
            options=self.sim.options,
            alerter=LogAlerter(),
            gate=self.sim.gate(self.clock),
        )

    # -- process life ---------------------------------------------------------------------------

    def guarded(self, step: Callable[[], None]) -> Callable[[], None]:
        """``step`` as an event of this process: skipped if the process died since it was planned;
        a Crash inside kills the process, a failed port call abandons the step (its messages come
        back after their visibility timeout)."""
        incarnation = self.incarnation

        def event() -> None:
            if self.incarnation != incarnation:
                return
            self.sim.actor = (self.worker_id, self.clock)
            try:
                step()
            except Crash:
                self.die()
            except PunctualError:
                pass

        return event

    def die(self) -> None:
        """kill -9: calls in flight end (their connections reset), pending events are forgotten."""
        now = self.sim.clock.now_ms()
        for flight in self.in_flight:
            self.sim.ledger.end(flight.call, now)
        self.in_flight = []
        self.held = {}
        self.instants = {}
        self.starting = {}
        self.incarnation += 1
        self.sim.faults.count("kill", "worker")

    def at(self, worker_ms: int, step: Callable[[], None]) -> None:
        """Plan ``step`` for when this worker's clock reads ``worker_ms``."""
        self.sim.schedule(worker_ms - self.clock.offset_ms, self.guarded(step))

    # -- receive --------------------------------------------------------------------------------

    def turn(self) -> None:
        self.guarded(self._receive)()

    def _receive(self) -> None:
        port = self.port()
        deliveries = self.sim.queue.receive(5, visibility_s=self.sim.options.visibility_s)
        now = self.clock.now_ms()
        drops, hides = [], []
        groups: defaultdict[int, list[Delivery]] = defaultdict(list)
        for delivery in deliveries:
            if not ids.is_run_id(delivery.run_id):
                drops.append(delivery.receipt)
            elif delivery.not_before - now > self.sim.options.max_early_ms:
                hides.append(delivery)
            else:
                groups[delivery.not_before].append(delivery)
        if drops or hides:
            batch_finish.drop_or_hide(port, drops, hides)
        for not_before, group in groups.items():
            if not_before <= now:
                self._lease_now(port, group)
            elif self.prelease:
                self._prelease(port, not_before, group)
            else:  # the worker sleeps until the instant, then leases
                self.at(not_before, lambda group=group: self._lease_now(self.port(), group))

    def _prelease(self, port: batch.Port, not_before: int, group: list[Delivery]) -> None:
        holding = reserving.hold_and_reserve(port, group, instant=not_before)
        claimed = self._claim(holding.deliveries)
        holding.reserved = {r: run for r, run in holding.reserved.items() if r in {d.receipt for d in claimed}}
        holding.deliveries = claimed
        self.held.update((job_id, not_before) for job_id in holding.jobs)
        if holding.jobs:
            self.sim.user.around(sorted(holding.jobs), not_before - self.clock.offset_ms)
        joined = self.instants.get(not_before)
        if joined is None:  # the first hold for this instant plans its task
            self.instants[not_before] = holding
            ahead = not_before - reserving.BEGIN_AHEAD_MS  # as the worker: versions read, attempts built
            self.at(ahead, lambda: self._before_instant(self.instants.pop(not_before), not_before))
        else:  # a later receive's runs join it (two copies of one message among them)
            joined.deliveries.extend(holding.deliveries)
            joined.jobs.update(holding.jobs)
            joined.runs.update(holding.runs)
            joined.reserved.update(holding.reserved)

    def _before_instant(self, holding: batch.Holding, not_before: int) -> None:
        """As the worker's instant task, just before the instant: which reserved runs go ahead."""
        port = self.port()
        reserved = [(d, holding.reserved[d.receipt]) for d in holding.deliveries if d.receipt in holding.reserved]
        try:
            begun = reserving.begin_reserved(port, reserved, holding.jobs, at=not_before)
        except BaseException:  # as the worker: a failed instant gives its starts up
            self._release(holding.deliveries)
            raise
        self.at(not_before, lambda: self._at_instant(holding, begun))

    def _at_instant(self, holding: batch.Holding, begun: reserving.Begun) -> None:
        """As the worker's instant task: the reserved runs called at once, their confirms planned for
        when they are answered or ``reserving.CONFIRM_WAIT_S`` later (:meth:`_confirm`); the rest
        leased, then called. The reserved runs' starts are released once confirmed."""
        confirming: list[Delivery] = []
        try:
            confirming = self._start_instant(holding, begun)
        finally:  # as the worker: the starts are in the store, or given up
            later = {delivery.receipt for delivery in confirming}
            self._release([d for d in holding.deliveries if d.receipt not in later])

    def _start_instant(self, holding: batch.Holding, begun: reserving.Begun) -> list[Delivery]:
        """Returns the deliveries of the reserved calls whose confirm is still to come."""
        port = self.port()
        flights = [self._begin(port, one, settle=False) for one in begun.calls]
        waiting: list[tuple[batch.Leased, InFlight | None]] = []
        if begun.calls:
            # until its confirm, a reserved call is covered by its reservation only (instant + grace,
            # by this worker's clock): a process that stalls past it may see its run taken over (b)
            for one, flight in zip(begun.calls, flights, strict=True):
                if flight is not None:
                    flight.call.lease_end = begun.seen[one.delivery.receipt].lease_expires_at or 0
            # the call of a process that stalls before its confirms (the other stalls come after them)
            # is confirmed by its finish: its answer comes after the reservation ended, and its finish
            # is refused if another worker took the run meanwhile
            for flight in flights:
                if flight is not None and flight.stalled and self.sim.rng.random() < 0.5:
                    flight.confirm = True
            for one, flight in zip(begun.calls, flights, strict=True):
                if flight is None or not flight.confirm:
                    waiting.append((one, flight))
                    if flight is not None:
                        flight.awaiting_confirm = True
            for flight in flights:  # answered before the confirms go out: confirmed by their finish
                if flight is not None and flight.duration == 0:
                    self._end(flight, 0, flight.leased.job.timeout_s * SECOND)
            if waiting:
                wait_ms = int(reserving.CONFIRM_WAIT_S * SECOND)
                self.at(begun.now + wait_ms, lambda: self._confirm(begun, waiting))
        rest = [*begun.rest, *(d for d in holding.deliveries if d.receipt not in holding.reserved)]
        prepared = batch.prepare(port, rest, known=holding.jobs, seen=holding.runs, defer_cover=True)
        self._begin_all(port, prepared.leased)
        batch.cover(port, begun.calls)
        return [one.delivery for one, _ in waiting]

    def _confirm(self, begun: reserving.Begun, waiting: list[tuple[batch.Leased, InFlight | None]]) -> None:
        """As the worker's confirms: the calls answered meanwhile were confirmed by their finishes;
        the others' attempts are counted now (a refused confirm cuts its call)."""
        pending = reserving.Begun(now=begun.now, seen=begun.seen)
        flights: list[InFlight | None] = []
        for one, flight in waiting:
            if flight is None or flight.awaiting_confirm:
                pending.calls.append(one)
                flights.append(flight)
        try:
            if pending.calls:
                for flight, ok in zip(flights, reserving.confirm(self.port(), pending), strict=True):
                    if flight is None:
                        continue
                    flight.awaiting_confirm = False
                    if ok:  # counted: now the call holds its lease
                        flight.call.lease_end = flight.started + flight.leased.lease_ms
                    else:  # the reservation was lost: the call is cut
                        self._cut(flight)
        finally:
            self._release([one.delivery for one, _ in waiting])

    def _lease_now(self, port: batch.Port, group: list[Delivery]) -> None:
        claimed = self._claim(group)
        try:
            prepared = batch.prepare(port, claimed, defer_cover=True)
        finally:
            self._release(claimed)
        self._begin_all(port, prepared.leased)

    def _claim(self, deliveries: list[Delivery]) -> list[Delivery]:
        """As the worker: one copy of each run's message is started; the others are left alone."""
        return [d for d in deliveries if self.starting.setdefault(d.run_id, d.receipt) == d.receipt]

    def _release(self, deliveries: list[Delivery]) -> None:
        for delivery in deliveries:
            if self.starting.get(delivery.run_id) == delivery.receipt:
                del self.starting[delivery.run_id]

    # -- calls ----------------------------------------------------------------------------------

    def _begin_all(self, port: batch.Port, leased: Sequence[batch.Leased]) -> None:
        """The calls first, then the messages hidden for their lease (``batch.cover``), as the worker does."""
        for one in leased:
            self._begin(port, one)
        batch.cover(port, leased)

    def _begin(self, port: batch.Port, leased: batch.Leased, *, settle: bool = True) -> InFlight | None:
        """Begin ``leased``'s call; a call that answers at once is settled now unless ``settle`` is
        False (its attempt is confirmed first: the caller ends it). Returns the call in flight."""
        now = self.clock.now_ms()
        if not leased.may_execute:
            batch_finish.settle(port, [batch_finish.Done(leased, None, now, now)])
            return None
        run, job = leased.run, leased.job
        call = Call(
            run.run_id, job.id, job.owner, run.scheduled_at, run.trigger, run.attempt, self.worker_id,
            self.sim.clock.now_ms(), now + leased.lease_ms, job.version, keyed=key_ceilings(job),
        )  # fmt: skip
        self.sim.ledger.begin(call, now)
        kind = self.sim.faults.roll("target", ("stall",))
        if kind is not None:
            self.sim.faults.count(kind, "target")
        elif self.sim.slow_calls and self.sim.rng.random() < 0.3:  # a call that takes a while: heartbeats
            kind = "long"
        timeout_ms = job.timeout_s * SECOND
        if kind == "long":
            duration = self.sim.rng.randint(1, timeout_ms // SECOND) * SECOND
        elif kind == "stall":
            duration = leased.lease_ms + self.sim.rng.randint(5, 90) * SECOND
        else:
            duration = 0
        flight = InFlight(leased, call, now, stalled=kind == "stall", duration=duration)
        self.in_flight.append(flight)
        if duration == 0:
            if settle:
                self._end(flight, duration, timeout_ms)
            return flight
        if not flight.stalled:
            self._plan_beat(flight)
        self.at(now + duration, lambda: self._end(flight, duration, timeout_ms))
        return flight

    def _cut(self, flight: InFlight) -> None:
        """A call whose reservation was lost before its confirm: cut, nothing written."""
        if flight in self.in_flight:
            self.in_flight.remove(flight)
            self.sim.ledger.end(flight.call, self.sim.clock.now_ms())

    def _plan_beat(self, flight: InFlight) -> None:
        interval = max(flight.leased.lease_ms // 3, int(self.sim.options.min_heartbeat_s * SECOND))
        self.at(self.clock.now_ms() + interval, lambda: self._beat(flight))

    def _beat(self, flight: InFlight) -> None:
        if flight not in self.in_flight:
            return
        alive = batch_finish.beat(self.port(), [flight.leased])[0]
        if not alive:  # the lease is lost: the call is cut, its attempt abandoned
            self.in_flight.remove(flight)
            self.sim.ledger.end(flight.call, self.sim.clock.now_ms())
            return
        flight.call.lease_end = self.clock.now_ms() + flight.leased.lease_ms
        self._plan_beat(flight)

    def _end(self, flight: InFlight, duration: int, timeout_ms: int) -> None:
        if flight not in self.in_flight:
            return
        self.in_flight.remove(flight)
        self.sim.ledger.end(flight.call, self.sim.clock.now_ms())
        leased = flight.leased
        result = self.sim.target_result(leased, duration >= timeout_ms)
        if duration >= timeout_ms:
            result = timed_out(timeout_ms / SECOND)
        if flight.awaiting_confirm:  # answered before its confirm went out: its finish confirms it
            flight.awaiting_confirm, flight.confirm = False, True
        done = batch_finish.Done(leased, result, flight.started, self.clock.now_ms(), confirm=flight.confirm)
        batch_finish.settle(self.port(), [done])


def scripted(fail: bool) -> TargetResult:
    if fail:
        return TargetResult(ok=False, status_code=503, error="HTTP 503 (scripted)", retryable=True)
    return TargetResult(ok=True, status_code=200)
