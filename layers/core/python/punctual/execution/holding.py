"""Holding runs for their instant (pre-leasing), the async worker's half that runs before it.

A group of runs whose instant is still ahead is held: their jobs are read and their requests built
and connections opened (``batch.hold``; nothing is written, no attempt counted: the messages'
visibility is the reservation). At the instant, every run held for it, from however many receives,
is leased in one batch (``batch.prepare`` with the jobs read, re-validated by their versions) and
only then are their calls written. Mixed into :class:`punctual.execution.worker.Worker`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from punctual import ids
from punctual.execution import batch
from punctual.execution.loop import FIRST_ATTEMPT, Instant, LoopState, Settled, prebuild_all
from punctual.execution.targets.aio import Prebuilding, Warming
from punctual.port import Delivery

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Holding:
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

    async def _held_until(
        self, not_before: int, futures: dict[str, asyncio.Future[Settled]], deliveries: list[Delivery]
    ) -> list[batch.Leased]:
        """A pre-lease: read the jobs and build the requests now, lease at ``not_before``."""
        try:
            holding = await self._blocking(batch.hold, self.port, deliveries)
        except Exception as exc:
            logger.exception("could not read the jobs of %d runs held for their instant", len(deliveries))
            for delivery in deliveries:
                self._resolve(futures[delivery.receipt], exc)
            return []
        for delivery, outcome in holding.settled:
            self._resolve(futures[delivery.receipt], outcome)
        if not holding.deliveries:
            return []
        targets = self._require_state().targets
        if isinstance(targets, Prebuilding):  # the requests, before the instant
            await self._blocking(prebuild_all, targets, holding)
            if isinstance(targets, Warming):  # and their connections (TCP, TLS handshakes)
                targets.warm([(delivery.run_id, FIRST_ATTEMPT) for delivery in holding.deliveries])
        verdicts = await self._lease_at(not_before, holding)
        leased: list[batch.Leased] = []
        for delivery in holding.deliveries:
            verdict = verdicts[delivery.receipt]
            if isinstance(verdict, batch.Leased):
                leased.append(verdict)
            else:
                self._resolve(futures[delivery.receipt], verdict)
            if isinstance(targets, Prebuilding) and not (
                isinstance(verdict, batch.Leased) and verdict.run.attempt == FIRST_ATTEMPT
            ):
                job = holding.jobs[ids.parse_run_id(delivery.run_id)[0]]
                targets.forget(batch.provisional_run(delivery, job), FIRST_ATTEMPT)
        return leased

    async def _lease_at(self, not_before: int, holding: batch.Holding) -> dict[str, batch.Leased | Settled]:
        """At ``not_before``, :func:`batch.prepare` of every run held for that instant, in one call
        for all the receives they came in (one batch of leases before any target call, instead of
        one per receive interleaved with them). Maps each receipt to its run, or to how it settled."""
        state = self._require_state()
        instant = state.instants.get(not_before)
        if instant is None or instant.closed:
            instant = state.instants[not_before] = Instant(state.loop.create_future())
            task = asyncio.create_task(self._lease_instant(not_before, instant))
            state.tasks.add(task)
            task.add_done_callback(state.tasks.discard)
        instant.deliveries.extend(holding.deliveries)
        instant.jobs.update(holding.jobs)
        instant.runs.update(holding.runs)
        return await asyncio.shield(instant.done)

    async def _lease_instant(self, not_before: int, instant: Instant) -> None:
        state = self._require_state()
        verdicts: dict[str, batch.Leased | Settled] = {}
        try:
            await self._until(not_before)
        finally:
            instant.closed = True  # later arrivals for this instant get their own lease
            if state.instants.get(not_before) is instant:
                del state.instants[not_before]
        try:
            lease = partial(batch.prepare, known=instant.jobs, seen=instant.runs, defer_cover=True)
            prepared = await self._blocking(lease, self.port, instant.deliveries, urgent=True)
            verdicts.update((leased.delivery.receipt, leased) for leased in prepared.leased)
            verdicts.update((delivery.receipt, outcome) for delivery, outcome in prepared.settled)
        except Exception as exc:  # nothing leased: the messages come back after their visibility
            logger.exception("could not lease %d runs at their instant", len(instant.deliveries))
            verdicts = dict.fromkeys((delivery.receipt for delivery in instant.deliveries), exc)
        instant.done.set_result(verdicts)
