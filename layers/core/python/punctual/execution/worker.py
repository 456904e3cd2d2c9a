"""The worker: one asyncio event loop per process, thousands of runs in flight, the port in batches.

Used by ``punctual worker`` (a laptop, a VM, the Fargate service), ``punctual dev`` and the worker
Lambda (:meth:`Worker.process` on an event-source batch). The unit of concurrency is a target call
on the loop (one per run in flight, bounded by ``max_in_flight``; driven by callbacks, no task per
run where the targets can: ``AsyncTargets.call``), the unit of work a batch::

    receivers ──receive(N)──> parse, hide the far-too-early ──sleep until not_before──> prepare (lease a batch)
        ┌───────────────────────────────────────────────────────────────────────────────────┘
        └─> one target call per leased run ──> done list ──> settle (finish + ack a batch)
    beats: every tick, one batched heartbeat of the in-flight runs whose beat is due; a lost lease
           cancels its call (the attempt is abandoned, as the threaded worker did)

Blocking engine calls (every port method) run on a small thread pool, never on the loop; the
batch steps themselves are ``punctual.execution.batch`` and ``batch_finish``. The rules are those
of ``punctual.execution.delivery`` (and ``leasing``): a run is leased at its instant (so ``started_at`` is never before
``scheduled_at``, and a pause, delete or replace that happened before the instant is honoured),
its message is deleted only after its finish, and every step is safe to repeat.

Stopping is graceful: receivers stop, every run in flight finishes and is settled, then
:meth:`Worker.run` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from punctual import ids
from punctual.clock import Clock
from punctual.execution import batch, batch_finish
from punctual.execution.holding import Holding
from punctual.execution.leasing import observe_start
from punctual.execution.loop import LoopState, Running, Settled, Tuning, beat_loop, runner
from punctual.execution.options import RUN_METRICS, ExecutionOptions, Outcome
from punctual.execution.targets.abilities import AsyncTargetExecutor
from punctual.execution.targets.aio import AsyncTargets
from punctual.execution.targets.policy import TargetPolicy
from punctual.execution.targets.types import TargetResult
from punctual.metrics import Metrics
from punctual.port import Delivery, Engine, Queue
from punctual.runs.alerts import Alerter, LogAlerter
from punctual.tenancy.admission import Gate

logger = logging.getLogger(__name__)

T = TypeVar("T")

RECEIVE_ERROR_PAUSE_S = 1.0  # after a failed receive (queue outage), before trying again


def default_worker_id() -> str:
    """``<host>:<pid>``: enough to find the process that ran an attempt."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Worker(Holding):
    """Executes runs from ``queue`` (default: ``engine.queue``) until stopped; see the module docstring.

    ``complete`` finishes and acknowledges a batch: by default ``engine.finish_and_ack`` (one step
    where the engine can); the Lambda adapter passes its own, since the event source deletes its
    messages. ``targets`` is built on the worker's loop from ``policy`` if not given.
    """

    name = "worker"

    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        *,
        policy: TargetPolicy | None = None,
        targets: Callable[[], AsyncTargetExecutor] | None = None,
        options: ExecutionOptions | None = None,
        tuning: Tuning | None = None,
        alerter: Alerter | None = None,
        worker_id: str | None = None,
        metrics: Metrics | None = None,
        queue: Queue | None = None,
        complete: batch.Complete | None = None,
        gate: Gate | None = None,
    ) -> None:
        self.engine, self.clock = engine, clock
        self.tuning = tuning or Tuning()
        if self.tuning.max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        self.options = options or ExecutionOptions()
        self.worker_id = worker_id or default_worker_id()
        self.metrics = metrics
        self.queue = queue or engine.queue
        self.port = batch.Port(
            store=engine.store,
            queue=self.queue,
            complete=complete or engine.finish_and_ack,
            clock=clock,
            worker_id=self.worker_id,
            options=self.options,
            alerter=alerter or LogAlerter(),
            gate=gate,
            metrics=metrics,
        )
        self.make_targets: Callable[[], AsyncTargetExecutor] = targets or (
            lambda: AsyncTargets(
                policy or TargetPolicy(),
                keys=engine.keys,
                max_connections_per_host=self.tuning.max_connections_per_host,
                callback_base_url=self.options.callback_base_url,
            )
        )
        self.outcomes: Counter[Outcome] = Counter()  # what deliveries came to, for tests and metrics
        self.errors = 0  # deliveries whose batch raised (their messages come back after the visibility timeout)
        self._state: LoopState | None = None

    # -- entry points ---------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Execute runs until ``stop`` is set; returns once every run in flight was settled."""
        with runner() as loop_runner:
            loop_runner.run(self.serve(stop))

    async def serve(self, stop: threading.Event) -> None:
        """:meth:`run` on the current event loop."""
        async with self.session():
            receivers = [asyncio.create_task(self._receive(stop)) for _ in range(max(1, self.tuning.receivers))]
            await asyncio.gather(*receivers)

    async def process(self, deliveries: Sequence[Delivery]) -> list[Settled]:
        """Execute ``deliveries`` (already received) and wait until each is settled; inside :meth:`session`."""
        return list(await asyncio.gather(*self._submit(deliveries)))

    @contextlib.asynccontextmanager
    async def session(self) -> Any:
        """The loop-side machinery (thread pool, targets, settle and heartbeat tasks); on exit every
        delivery in flight is settled first."""
        loop = asyncio.get_running_loop()
        executor = ThreadPoolExecutor(max_workers=self.tuning.engine_threads, thread_name_prefix="punctual-engine")
        # the runs due now (recheck, lease at the instant) never queue behind a pre-lease or a settle
        urgent = ThreadPoolExecutor(max_workers=1, thread_name_prefix="punctual-instant")
        # receives (long polls) never wait behind leases and settles either: their own threads
        receiving = ThreadPoolExecutor(max_workers=max(1, self.tuning.receivers), thread_name_prefix="punctual-receive")
        targets = await loop.run_in_executor(executor, self.make_targets)  # loads the CA bundle off the loop
        state = LoopState(loop, executor, targets, urgent, receiving)
        self._state = state
        tasks = [
            asyncio.create_task(self._settle_loop(state)),
            asyncio.create_task(beat_loop(state, self.port, self.options)),
        ]
        try:
            yield self
        finally:
            while state.in_flight:  # bounded: every attempt ends by its job's timeout
                await asyncio.sleep(0.02)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            targets.close()
            executor.shutdown(wait=True)
            urgent.shutdown(wait=True)
            receiving.shutdown(wait=True)
            self._state = None

    # -- receive and prepare ------------------------------------------------------------------

    async def _receive(self, stop: threading.Event) -> None:
        state = self._require_state()
        tuning = self.tuning
        idle = True  # the last receive found nothing (a queue not yet polled counts as empty): poll alone
        while not stop.is_set():
            async with state.idle_poll if idle else contextlib.nullcontext():
                room = tuning.max_in_flight - state.in_flight - state.reserved
                if room <= 0 or stop.is_set():
                    deliveries: list[Delivery] | None = []
                else:
                    deliveries = await self._receive_once(state, min(tuning.receive_batch, room))
            if room <= 0:
                state.room.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.1):
                        await state.room.wait()
                continue
            if deliveries is None:
                await asyncio.sleep(RECEIVE_ERROR_PAUSE_S)
                continue
            idle = not deliveries
            if deliveries:  # received means ours: settled even if stop is set meanwhile
                self._submit(deliveries)

    async def _receive_once(self, state: LoopState, wanted: int) -> list[Delivery] | None:
        """One receive of up to ``wanted`` messages (a long poll); None if it failed."""
        state.reserved += wanted
        try:
            receive = partial(self.queue.receive, wanted, self.options.visibility_s, self.tuning.wait_s)
            return await state.loop.run_in_executor(state.receiving, receive)
        except Exception:
            logger.exception("receive from %s failed", self.queue.name)
            return None
        finally:
            state.reserved -= wanted

    def _submit(self, deliveries: Sequence[Delivery]) -> list[asyncio.Future[Settled]]:
        state = self._require_state()
        futures = [state.loop.create_future() for _ in deliveries]
        state.in_flight += len(deliveries)
        task = asyncio.create_task(self._handle(list(zip(deliveries, futures, strict=True))))
        state.tasks.add(task)
        task.add_done_callback(state.tasks.discard)
        return futures

    async def _handle(self, items: list[tuple[Delivery, asyncio.Future[Settled]]]) -> None:
        """Drop messages that name no run, hide those far too early, then wait for each group's instant."""
        now = self.clock.now_ms()
        drops: list[str] = []
        hides: list[Delivery] = []
        early: list[tuple[asyncio.Future[Settled], Outcome]] = []
        due: dict[int, list[tuple[Delivery, asyncio.Future[Settled]]]] = {}
        for delivery, future in items:
            if not ids.is_run_id(delivery.run_id):
                logger.error("dropping a message that names no run: %r %s", delivery.run_id, delivery.extra)
                drops.append(delivery.receipt)
                early.append((future, Outcome.INVALID))
                continue
            if delivery.not_before - now > self.options.max_early_ms:  # whole-second SQS delays: ~1 s early at most
                hides.append(delivery)
                early.append((future, Outcome.NOT_READY))
                continue
            due.setdefault(delivery.not_before, []).append((delivery, future))
        if early:
            try:
                await self._blocking(batch_finish.drop_or_hide, self.port, drops, hides)
            except Exception as exc:
                logger.exception("could not drop or hide %d messages", len(early))
                early = [(future, exc) for future, _ in early]  # type: ignore[misc]
            for future, settled in early:
                self._resolve(future, settled)
        await asyncio.gather(*(self._at_instant(not_before, group) for not_before, group in due.items()))

    async def _at_instant(self, not_before: int, group: list[tuple[Delivery, asyncio.Future[Settled]]]) -> None:
        """Hold the group until its instant where it is still ahead (a pre-lease: the jobs read, the
        requests built and the connections opened, nothing written), then lease it at the instant
        and start the target call of each leased run at once: the lease begins the attempt."""
        futures = {delivery.receipt: future for delivery, future in group}
        deliveries = [delivery for delivery, _ in group]
        if self.options.prelease_s > 0 and not_before > self.clock.now_ms():
            await self._held_until(not_before, futures, deliveries)  # its instant's task starts the calls
            return
        else:
            await self._until(not_before)
            prepared = await self._prepare_due(futures, deliveries)
            leased = [] if prepared is None else prepared.leased
        state = self._require_state()
        for one in leased:  # each call written (or queued for a connection) now, before anything else runs
            self._start(state, one, futures[one.delivery.receipt])
        if leased:  # then their messages hidden for their lease (the first heartbeat comes a third of it later)
            try:
                await self._blocking(batch.cover, self.port, leased)
            except Exception:  # a redelivery meanwhile finds the run held and hides itself again
                logger.warning("could not hide the messages of %d runs for their lease", len(leased), exc_info=True)

    async def _prepare(
        self, futures: dict[str, asyncio.Future[Settled]], deliveries: list[Delivery], *, urgent: bool = False
    ) -> batch.Prepared | None:
        """Lease ``deliveries`` in one batch and resolve those settled already; None if the batch failed."""
        deliveries = self._claim_starts(deliveries, futures)  # one copy of each run's message
        try:
            lease = partial(batch.prepare, defer_cover=True)
            prepared = await self._blocking(lease, self.port, deliveries, urgent=urgent)
        except Exception as exc:
            logger.exception("could not lease a batch of %d runs", len(deliveries))
            for delivery in deliveries:
                self._resolve(futures[delivery.receipt], exc)
            return None
        finally:
            self._release_starts(deliveries)  # leased: in the store, where other copies find them held
        for delivery, outcome in prepared.settled:
            self._resolve(futures[delivery.receipt], outcome)
        return prepared

    async def _until(self, at_ms: int) -> None:
        """Sleep until the clock reads ``at_ms`` (timers may fire a little early: a few tries, bounded
        for clocks that do not follow the loop's)."""
        for _ in range(3):
            wait_ms = at_ms - self.clock.now_ms()
            if wait_ms <= 0:
                return
            await asyncio.sleep(wait_ms / 1000)

    # -- execute ------------------------------------------------------------------------------

    def _start(self, state: LoopState, leased: batch.Leased, future: asyncio.Future[Settled]) -> Running | None:
        """Start one attempt's target call; :meth:`_answered` hears how it ended (no task per run).
        Returns what is in flight (None: buried unexecuted, earlier attempts used up the retries)."""
        started = self.clock.now_ms()
        run = leased.run
        observe_start(self.metrics, leased.job, run, started, leased.waited)
        if not leased.may_execute:  # earlier attempts lost their workers and used up the retries
            self._done(state, batch_finish.Done(leased, None, started, started), future)
            return None
        running = self._running(leased, future, started)
        state.running[id(running)] = running
        job = leased.job
        running.call = state.call(job, run, run.attempt, float(job.timeout_s), partial(self._answered, state, running))
        return running

    def _answered(self, state: LoopState, running: Running, result: TargetResult | BaseException) -> None:
        """An attempt's target call ended: its run is settled with the others done by then, or
        abandoned if the heartbeat found its lease lost meanwhile (nothing is written)."""
        state.running.pop(id(running), None)
        running.call = None  # the call's reply holds the running attempt: no cycle left for the collector
        leased = running.leased
        if running.lost:
            logger.warning("run %s attempt %d: lease lost while running", leased.run.run_id, leased.run.attempt)
            self._resolve(running.future, Outcome.LEASE_LOST)
        elif isinstance(result, BaseException):  # the targets broke their promise: the message is left alone
            if not isinstance(result, asyncio.CancelledError):
                logger.error("run %s: the target call raised", leased.run.run_id, exc_info=result)
            self._resolve(running.future, result)
        else:
            self._done(state, batch_finish.Done(leased, result, running.started, self.clock.now_ms()), running.future)

    def _done(self, state: LoopState, done: batch_finish.Done, future: asyncio.Future[Settled]) -> None:
        receipt = done.leased.delivery.receipt
        if receipt in state.unconfirmed:  # answered before its attempt was confirmed: settled after it
            state.parked[receipt] = (done, future)
            return
        state.done.append((done, future))
        state.settle.set()

    async def _settle_loop(self, state: LoopState) -> None:
        """Finish and acknowledge done attempts, as many per call as have accumulated."""
        pending = state.done
        limit = self.tuning.settle_batch
        while True:
            await state.settle.wait()
            while (quiet := state.quiet_until - state.loop.time()) > 0:  # an instant's calls go first
                await asyncio.sleep(quiet)
            state.settle.clear()
            while pending:
                items = pending[:limit]
                del pending[:limit]
                try:
                    settle = partial(batch_finish.settle, self.port, [done for done, _ in items])
                    outcomes: list[Settled] = list(await state.loop.run_in_executor(state.executor, settle))
                except Exception as exc:  # their leases expire and the runs are taken over
                    logger.exception("could not settle a batch of %d runs", len(items))
                    outcomes = [exc] * len(items)
                self._resolve_all(state, [future for _, future in items], outcomes)

    # -- helpers ------------------------------------------------------------------------------

    def _resolve(self, future: asyncio.Future[Settled], settled: Settled) -> None:
        self._resolve_all(self._require_state(), [future], [settled])

    def _resolve_all(self, state: LoopState, futures: list[asyncio.Future[Settled]], settled: list[Settled]) -> None:
        """Resolve each delivery's future with how it settled, and count the outcomes (once per batch)."""
        outcomes: list[Outcome] = []
        resolved = errors = 0
        for future, one in zip(futures, settled, strict=True):
            if future.done():
                continue
            future.set_result(one)
            resolved += 1
            if isinstance(one, Outcome):
                outcomes.append(one)
            else:
                errors += 1
        if not resolved:
            return
        state.in_flight -= resolved
        state.room.set()
        self.outcomes.update(outcomes)
        self.errors += errors
        if self.metrics is not None:
            for outcome, count in Counter(outcomes).items():
                if outcome in RUN_METRICS:
                    self.metrics.count(RUN_METRICS[outcome], count)

    async def _blocking(self, fn: Callable[..., T], *args: Any, urgent: bool = False) -> T:
        state = self._require_state()
        return await state.loop.run_in_executor(state.urgent if urgent else state.executor, partial(fn, *args))

    def _require_state(self) -> LoopState:
        if self._state is None:
            raise RuntimeError("the worker is used outside its session")
        return self._state
