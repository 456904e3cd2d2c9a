"""Holding runs for their instant (pre-leasing), the async worker's half that runs before it.

A group of runs whose instant is still ahead is held: their jobs and runs are read, the runs that
may start as they are reserved for this worker (``execution.reserving``: no attempt counted), their
requests built and connections opened. At the instant, every run held for it, from however many
receives, is handled by one task: the reserved runs whose jobs did not change are called at once;
once their answers are in (or ``reserving.CONFIRM_WAIT_S`` passed, or a burst's quiet), those
answered are finished by writes that also confirm them (``Done.confirm``: one write a run), and
those still in flight are confirmed (a refused confirm cuts its call, a refused confirmed finish
drops its answer); the others are leased first (``batch.prepare``), then called. A worker starts
one copy of a run's message at a time (:meth:`Holding._claim_starts`). Mixed into
:class:`punctual.execution.worker.Worker`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from punctual import ids
from punctual.execution import batch, reserving
from punctual.execution.loop import FIRST_ATTEMPT, Instant, LoopState, Running, Settled, prebuild_all
from punctual.execution.options import Outcome
from punctual.execution.targets.abilities import Prebuilding, Warming
from punctual.execution.volleys import Volleys
from punctual.port import Delivery

logger = logging.getLogger(__name__)

T = TypeVar("T")

# After an instant starts this many calls at once, the worker writes no finishes for QUIET_S: the
# CPU (and the GIL: finishes are written on a thread) goes to writing the burst's requests and
# reading its answers, which is what the targets see; the finishes follow, a run ends that much later.
QUIET_AFTER_CALLS = 1_000
QUIET_S = 0.75
COPY_BACK_S = 1  # a copy of a message whose run this worker is starting comes back after this


class Holding(Volleys):
    """What :class:`~punctual.execution.worker.Worker` does with runs held for their instant."""

    port: batch.Port

    def _require_state(self) -> LoopState:
        raise NotImplementedError

    def _resolve(self, future: asyncio.Future[Settled], settled: Settled) -> None:
        raise NotImplementedError

    async def _blocking(self, fn: Callable[..., T], *args: Any, urgent: bool = False) -> T:
        raise NotImplementedError

    async def _until(self, at_ms: int) -> None:
        raise NotImplementedError

    async def _prepare(
        self, futures: dict[str, asyncio.Future[Settled]], deliveries: list[Delivery], *, urgent: bool = False
    ) -> batch.Prepared | None:
        raise NotImplementedError

    async def _prepare_due(
        self, futures: dict[str, asyncio.Future[Settled]], deliveries: list[Delivery]
    ) -> batch.Prepared | None:
        """Lease ``deliveries`` (due now) and start their calls. While runs wait in this worker's
        line for slots (``tenancy.line``), through the lane (``execution.lane``: best first, the calls
        started by the lane's turn; returns None once they were), else at once (returns what was
        leased: the caller starts their calls)."""
        gate = self.port.gate
        if gate is None or not len(gate.line):
            return await self._prepare(futures, deliveries, urgent=True)
        state = self._require_state()
        loop = state.loop
        done = [loop.create_future() for _ in deliveries]
        for delivery, one in zip(deliveries, done, strict=True):
            state.lane.add(delivery, gate.line.standing(delivery.run_id), one)
            state.turns[delivery.receipt] = futures[delivery.receipt]
        if not state.lane.busy:
            state.lane.busy = True
            task = asyncio.create_task(self._take_turns(state))
            state.tasks.add(task)
            task.add_done_callback(state.tasks.discard)
        await asyncio.gather(*done)
        return None

    async def _take_turns(self, state: LoopState) -> None:
        """Lease the lane's best deliveries, a turn at a time, and start their calls, until it is empty."""
        try:
            while taken := state.lane.take():
                futures = {delivery.receipt: state.turns.pop(delivery.receipt) for delivery, _ in taken}
                prepared = await self._prepare(futures, [delivery for delivery, _ in taken], urgent=True)
                leased = [] if prepared is None else prepared.leased
                for one in leased:
                    self._start(state, one, futures[one.delivery.receipt])
                for _, done in taken:
                    done.set_result(True)
                if leased:  # their messages hidden for their lease, off the lane's path
                    task = asyncio.create_task(self._cover(leased))
                    state.tasks.add(task)
                    task.add_done_callback(state.tasks.discard)
        finally:
            state.lane.busy = False
            for _, _, delivery, done in state.lane.heap:  # only if a turn raised: never left waiting
                if not done.done():
                    self._resolve(state.turns.pop(delivery.receipt), RuntimeError("the lane stopped"))
                    done.set_result(True)
            state.lane.heap.clear()

    async def _cover(self, leased: list[batch.Leased]) -> None:
        try:
            await self._blocking(batch.cover, self.port, leased)
        except Exception:  # a redelivery meanwhile finds the run held and hides itself again
            logger.warning("could not hide the messages of %d runs for their lease", len(leased), exc_info=True)

    async def _held_until(
        self, not_before: int, futures: dict[str, asyncio.Future[Settled]], deliveries: list[Delivery]
    ) -> None:
        """A pre-lease: read the jobs and runs, reserve what may start as it is, build the requests
        now; at ``not_before`` the instant's task (:meth:`_run_instant`) starts the calls."""
        try:
            hold = partial(reserving.hold_and_reserve, instant=not_before)
            holding = await self._blocking(hold, self.port, deliveries)
        except Exception as exc:
            logger.exception("could not hold %d runs for their instant", len(deliveries))
            for delivery in deliveries:
                self._resolve(futures[delivery.receipt], exc)
            return
        for delivery, outcome in holding.settled:
            self._resolve(futures[delivery.receipt], outcome)
        claimed = self._claim_starts(holding.deliveries, futures)
        if len(claimed) < len(holding.deliveries):
            kept = {delivery.receipt for delivery in claimed}
            holding.reserved = {receipt: run for receipt, run in holding.reserved.items() if receipt in kept}
            holding.deliveries = claimed
        if not holding.deliveries:
            return
        targets = self._require_state().targets
        if isinstance(targets, Prebuilding):  # the requests, before the instant
            await self._blocking(prebuild_all, targets, holding)
            if isinstance(targets, Warming):  # and their connections (TCP, TLS handshakes)
                targets.warm([(delivery.run_id, FIRST_ATTEMPT) for delivery in holding.deliveries], not_before)
        await self._join_instant(not_before, holding, futures)

    async def _join_instant(
        self, not_before: int, holding: batch.Holding, futures: dict[str, asyncio.Future[Settled]]
    ) -> None:
        """Hand ``holding`` to the task of its instant (one for all the receives it came in), and
        wait until that task has started their calls."""
        state = self._require_state()
        instant = state.instants.get(not_before)
        if instant is None or instant.closed:
            instant = state.instants[not_before] = Instant(state.loop.create_future())
            task = asyncio.create_task(self._run_instant(not_before, instant))
            state.tasks.add(task)
            task.add_done_callback(state.tasks.discard)
        instant.deliveries.extend(holding.deliveries)
        instant.jobs.update(holding.jobs)
        instant.runs.update(holding.runs)
        instant.reserved.update(holding.reserved)
        instant.futures.update((d.receipt, futures[d.receipt]) for d in holding.deliveries)
        await asyncio.shield(instant.done)

    async def _run_instant(self, not_before: int, instant: Instant) -> None:
        """At ``not_before``: call the reserved runs that go ahead as read, confirm them, then lease
        and call the rest (see the module docstring); every delivery's future is resolved or its
        call started by the time ``instant.done`` is set."""
        state = self._require_state()
        try:
            await self._until(not_before - reserving.BEGIN_AHEAD_MS)
        finally:
            instant.closed = True  # later arrivals for this instant get their own task
            if state.instants.get(not_before) is instant:
                del state.instants[not_before]
        started: list[batch.Leased] = []
        confirming: asyncio.Task[None] | None = None
        try:
            reserved = [(d, instant.reserved[d.receipt]) for d in instant.deliveries if d.receipt in instant.reserved]
            begin = partial(reserving.begin_reserved, self.port, reserved, instant.jobs, at=not_before)
            begun = await self._blocking(begin, urgent=True)
            # unconfirmed before their calls are made: a heartbeat never takes an armed call for a lease
            state.unconfirmed.update(one.delivery.receipt for one in begun.calls)
            armed = self._arm(state, begun.calls, instant.futures, not_before)  # while the loop waits anyway
            try:
                await self._until(not_before)
            except BaseException:
                self._cut_armed(state, armed)
                raise
            if len(begun.calls) >= QUIET_AFTER_CALLS:  # a burst: its answers are read before finishes are written
                state.quiet_until = max(state.quiet_until, state.loop.time() + QUIET_S)
            calls = self._let_go(state, armed, begun.calls, instant.futures)
            started.extend(begun.calls)
            if calls:  # the calls are on their way: their attempts are counted once answered, or soon after
                confirming = asyncio.create_task(self._confirm_when_answered(state, begun, calls, instant.futures))
                if (quiet := state.quiet_until - state.loop.time()) > 0:  # a burst's answers are read first
                    await asyncio.sleep(quiet)
            # the rest do not wait for the reserved calls' answers
            rest = [d for d in instant.deliveries if d.receipt not in instant.reserved]
            lease = partial(batch.prepare, known=instant.jobs, seen=instant.runs, defer_cover=True)
            prepared = await self._blocking(lease, self.port, [*begun.rest, *rest], urgent=True)
            for one in prepared.leased:
                self._start(state, one, instant.futures[one.delivery.receipt])
            started.extend(prepared.leased)
            for delivery, outcome in prepared.settled:
                self._resolve(instant.futures[delivery.receipt], outcome)
        except Exception as exc:  # what was not started comes back after its visibility (or its reservation)
            logger.exception("could not start the %d runs of an instant", len(instant.deliveries))
            for delivery in instant.deliveries:
                self._resolve(instant.futures[delivery.receipt], exc)
        if confirming is not None:  # the reserved calls' starts are in the store once confirmed
            try:
                await confirming
            except Exception:  # unconfirmed calls are cut when their reservations are found lost
                logger.exception("could not confirm the reserved calls of an instant")
        self._release_starts(instant.deliveries)  # their starts are in the store (or were given up)
        self._forget_unused(instant, started)
        instant.done.set_result(True)
        if started:  # then their messages hidden for their lease (the first heartbeat comes a third of it later)
            try:
                await self._blocking(batch.cover, self.port, started)
            except Exception:  # a redelivery meanwhile finds the run held and hides itself again
                logger.warning("could not hide the messages of %d runs for their lease", len(started), exc_info=True)

    def _claim_starts(self, deliveries: list[Delivery], futures: dict[str, asyncio.Future[Settled]]) -> list[Delivery]:
        """The deliveries this worker may start: one per run, the first to claim it. Another copy of
        a run's message, while this worker is starting that run from the first (holding it for its
        instant, calling it before the confirm, leasing it), is left alone (``LEASE_LOST``) and comes
        back after ``COPY_BACK_S``: by then the first's start is in the store (the copy finds the run
        running or finished), or the first waited and was re-sent as this copy (a run over a limit:
        its old message is gone, and the copy must not wait out a whole visibility timeout). The loop
        is the lock: nothing awaits between a check and its claim."""
        state = self._require_state()
        claimed, copies = [], []
        for delivery in deliveries:
            if state.starting.setdefault(delivery.run_id, delivery.receipt) == delivery.receipt:
                claimed.append(delivery)
            else:
                self._resolve(futures[delivery.receipt], Outcome.LEASE_LOST)
                copies.append(delivery.receipt)
        if copies:
            task = asyncio.create_task(self._copies_back(copies))
            state.tasks.add(task)
            task.add_done_callback(state.tasks.discard)
        return claimed

    async def _copies_back(self, receipts: list[str]) -> None:
        try:
            await self._blocking(self.port.queue.extend_many, receipts, COPY_BACK_S)
        except Exception:  # they come back after their visibility timeout instead
            logger.warning("could not hide %d copies of messages being started", len(receipts), exc_info=True)

    def _release_starts(self, deliveries: list[Delivery]) -> None:
        """The starts of ``deliveries`` are in the store (leased, confirmed) or given up."""
        starting = self._require_state().starting
        for delivery in deliveries:
            if starting.get(delivery.run_id) == delivery.receipt:
                del starting[delivery.run_id]

    async def _confirm_when_answered(
        self,
        state: LoopState,
        begun: reserving.Begun,
        calls: list[tuple[batch.Leased, Running | None]],
        futures: dict[str, asyncio.Future[Settled]],
    ) -> None:
        """Once the reserved calls of ``begun`` were answered, or ``reserving.CONFIRM_WAIT_S`` later:
        the answered ones are finished by writes that confirm them, the others confirmed (one batch)."""
        await self._until_answered(state, begun.calls, futures)
        pending = self._finish_answered(state, begun)
        if not pending.calls:  # every call answered: each finish confirms its own, nothing is left to confirm
            return
        try:
            confirmed = await self._blocking(reserving.confirm, self.port, pending, urgent=True)
        finally:
            state.unconfirmed.difference_update(one.delivery.receipt for one in pending.calls)
        waiting = {one.delivery.receipt for one in pending.calls}
        in_flight = [(one, running) for one, running in calls if one.delivery.receipt in waiting]
        for (one, running), ok in zip(in_flight, confirmed, strict=True):
            self._confirmed(state, one, running, ok)

    async def _until_answered(
        self, state: LoopState, calls: list[batch.Leased], futures: dict[str, asyncio.Future[Settled]]
    ) -> None:
        """Wait until every one of ``calls`` was answered (or settled otherwise), at most until
        ``reserving.CONFIRM_WAIT_S`` from now or the end of a burst's quiet, whichever is later:
        an answer that comes first is confirmed by its finish (one write instead of two)."""
        deadline = max(state.quiet_until, state.loop.time() + reserving.CONFIRM_WAIT_S)
        if (quiet := state.quiet_until - state.loop.time()) > 0:  # a burst: nothing is finished before its end,
            await asyncio.sleep(quiet)  # and looking over thousands of calls would take the loop from the answers
        pending = [one.delivery.receipt for one in calls]
        while True:  # bounded by the deadline
            pending = [r for r in pending if r not in state.parked and not futures[r].done()]
            if not pending or (left := deadline - state.loop.time()) <= 0:
                return
            await asyncio.sleep(min(reserving.ANSWERS_POLL_S, left))

    def _finish_answered(self, state: LoopState, begun: reserving.Begun) -> reserving.Begun:
        """Hand the calls of ``begun`` answered by now to the settle loop, each finish confirming its
        attempt (``Done.confirm``: one conditional write); returns the rest, still in flight, to confirm."""
        pending = reserving.Begun(now=begun.now, seen=begun.seen)
        for one in begun.calls:
            receipt = one.delivery.receipt
            parked = state.parked.pop(receipt, None)
            if parked is None:
                pending.calls.append(one)
                continue
            state.unconfirmed.discard(receipt)
            done, future = parked
            state.done.append((dataclasses.replace(done, confirm=True), future))
        if len(pending.calls) < len(begun.calls):
            state.settle.set()
        return pending

    def _confirmed(self, state: LoopState, leased: batch.Leased, running: Running | None, ok: bool) -> None:
        """Its confirm is back: an answer that came first is settled now; a refused confirm (the
        reservation was lost) cuts the call, or drops its answer: nothing is written for it."""
        parked = state.parked.pop(leased.delivery.receipt, None)
        if ok:
            if parked is not None:
                state.done.append(parked)
                state.settle.set()
            return
        logger.warning("run %s: its reservation was lost before its attempt was confirmed", leased.run.run_id)
        if parked is not None:
            self._resolve(parked[1], Outcome.LEASE_LOST)
        elif running is not None and running.call is not None:
            running.lost = True
            running.call.cancel()

    def _forget_unused(self, instant: Instant, started: list[batch.Leased]) -> None:
        """Drop the requests built ahead for runs not started here as their first attempt."""
        targets = self._require_state().targets
        if not isinstance(targets, Prebuilding):
            return
        first = {one.delivery.receipt for one in started if one.run.attempt == FIRST_ATTEMPT}
        for delivery in instant.deliveries:
            if delivery.receipt not in first:
                job = instant.jobs[ids.parse_run_id(delivery.run_id)[0]]
                targets.forget(batch.provisional_run(delivery, job), FIRST_ATTEMPT)
