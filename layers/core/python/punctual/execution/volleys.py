"""An instant's calls made ahead of it and let go at once (a volley), the async worker's part.

At the top of a minute a worker makes thousands of calls at one instant. Making them (the attempt
in flight, the pool's call, its future and deadline) took 110-140 ms of the loop for 10,000 calls
on the 2-core machine, during which the burst's first 256 requests per key were written and no
answer was read: the target waited on the worker's Python. The reserved runs that go ahead are
known half a second before their instant (``reserving.begin_reserved``), while the loop waits for
it: their calls are made then (:meth:`Volleys._arm`), held by the targets (``AsyncTargets.arm``),
and at the instant the volley is released (:meth:`Volleys._let_go`): only the writes are left.
Nothing is written before the instant, and each attempt's start is stamped when it is let go.
Mixed into :class:`punctual.execution.worker.Worker` (through ``Holding``).
"""

from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import Any, cast

from punctual.clock import Clock
from punctual.execution import batch
from punctual.execution.leasing import observe_start
from punctual.execution.loop import Armed, LoopState, Running, Settled
from punctual.execution.options import ExecutionOptions
from punctual.execution.targets.abilities import Arming
from punctual.execution.targets.types import TargetResult
from punctual.execution.targets.wire_call import Volley
from punctual.metrics import Metrics


class Volleys:
    """What :class:`~punctual.execution.worker.Worker` does to make an instant's calls ahead of it."""

    clock: Clock
    metrics: Metrics | None
    options: ExecutionOptions

    def _start(self, state: LoopState, leased: batch.Leased, future: asyncio.Future[Settled]) -> Running | None:
        raise NotImplementedError

    def _answered(self, state: LoopState, running: Running, result: TargetResult | BaseException) -> None:
        raise NotImplementedError

    def _arm(self, state: LoopState, calls: list[batch.Leased], futures: dict[str, Any], at: int) -> Armed:
        """Make the calls of an instant ``at`` (epoch ms) ahead of it, held until :meth:`_let_go`:
        at the instant only their writes are left (``AsyncTargets.arm``). One whose attempt may not
        execute, or whose request is not ready, is left to :meth:`_start` at the instant."""
        targets = state.targets
        if not isinstance(targets, Arming) or not calls:
            return Armed(None, [None] * len(calls))
        volley = targets.volley((at - self.clock.now_ms()) / 1000)
        armed = Armed(volley, [])
        try:
            for leased in calls:
                armed.runnings.append(self._arm_one(state, targets, leased, futures, volley=volley, at=at))
        except BaseException:  # none of them goes: the caller starts none, and their deliveries are resolved
            self._cut_armed(state, armed)
            raise
        return armed

    def _arm_one(
        self,
        state: LoopState,
        targets: Arming,
        leased: batch.Leased,
        futures: dict[str, Any],
        *,
        volley: Volley,
        at: int,
    ) -> Running | None:
        """One call of :meth:`_arm`: the attempt in flight, or None (left to :meth:`_start`)."""
        if not leased.may_execute:
            return None
        job, run = leased.job, leased.run
        running = self._running(leased, futures[leased.delivery.receipt], at)
        reply = partial(self._answered, state, running)
        running.call = targets.arm(job, run, run.attempt, float(job.timeout_s), reply, volley=volley)
        if running.call is None:
            return None
        state.running[id(running)] = running
        return running

    def _let_go(
        self, state: LoopState, armed: Armed, calls: list[batch.Leased], futures: dict[str, Any]
    ) -> list[tuple[batch.Leased, Running | None]]:
        """The instant came: the armed calls go (their requests written, or queued for a
        connection), then the others start; each ``(leased, running)`` in the order of ``calls``."""
        started = self.clock.now_ms()
        if armed.volley is not None:
            cast(Arming, state.targets).release(armed.volley)
        begun: list[tuple[batch.Leased, Running | None]] = []
        for leased, running in zip(calls, armed.runnings, strict=True):
            if running is None:
                begun.append((leased, self._start(state, leased, futures[leased.delivery.receipt])))
            else:
                running.started = started
                observe_start(self.metrics, leased.job, leased.run, started, leased.waited)
                begun.append((leased, running))
        return begun

    def _cut_armed(self, state: LoopState, armed: Armed) -> None:
        """The instant's task ends before the instant (the worker stops): the armed calls are cut
        (their deliveries resolved as cancelled: the messages come back) and dropped."""
        for running in armed.runnings:
            if running is not None and running.call is not None:
                running.call.cancel()
        if armed.volley is not None:
            cast(Arming, state.targets).release(armed.volley)

    def _running(self, leased: batch.Leased, future: asyncio.Future[Settled], started: int) -> Running:
        interval = max(leased.lease_ms / 3000, self.options.min_heartbeat_s)
        return Running(leased, future, started, time.monotonic() + interval, interval)
