"""What the async worker holds while its event loop runs, and how it is tuned.

:class:`Tuning` is what ``punctual worker`` flags set; :class:`LoopState` is the worker's state on
its loop (touched only there): deliveries in flight, runs executing (for heartbeats), runs
pre-leased for an instant (:class:`Instant`), the attempts waiting to be settled and the thread pools for blocking
engine calls. :func:`runner` makes the loop (uvloop where installed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from punctual import ids
from punctual.execution import batch, batch_finish
from punctual.execution.lane import Lane
from punctual.execution.options import ExecutionOptions, Outcome
from punctual.execution.targets.abilities import AsyncTargetExecutor, Calling, Cancellable, Prebuilding, Reply
from punctual.execution.targets.aio import in_task
from punctual.execution.targets.wire_call import Volley
from punctual.model import Job, Run
from punctual.port import Delivery

logger = logging.getLogger(__name__)

Settled = Outcome | BaseException  # what a delivery came to: an outcome, or the error that left its message alone


@dataclass(frozen=True, slots=True)
class Tuning:
    """How much the worker holds and how it batches (``punctual worker`` flags)."""

    # Messages held at once: received, waiting for their instant, or executing. A minute's burst
    # must fit in the workers' sum: runs received after the instant are leased and called only once
    # earlier ones settled (20,000 every-minute jobs on 2 workers: 10,000 each; docs/decisions).
    max_in_flight: int = 16_000
    # Connections to one host (scheme, name, address, port) per worker process: the most a target
    # sees at once from each worker. Sized so that a minute's burst reaches one slow webhook within
    # the lateness goal: 10,000 calls answered in 200 ms over 4,096 connections take 3 rounds.
    max_connections_per_host: int = 4_096
    receive_batch: int = 250  # messages asked for per receive (SQS: 10 per request, several requests)
    receivers: int = 2  # concurrent receives while messages flow (SQS: long polls); an empty queue: one
    wait_s: float = 1.0  # long-poll wait of a receive (1 s locally; up to 20 s on SQS)
    settle_batch: int = 1_000  # finishes per settle call at most
    engine_threads: int = 4  # the thread pool for blocking engine calls


class LoopState:
    """Everything the worker holds while its loop runs (touched only on the loop)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        executor: ThreadPoolExecutor,
        targets: AsyncTargetExecutor,
        urgent: ThreadPoolExecutor,
        receiving: ThreadPoolExecutor,
    ) -> None:
        self.loop, self.executor, self.targets = loop, executor, targets
        self.urgent, self.receiving = urgent, receiving  # pools of their own: the instant's work, receives
        # how an attempt starts: by callback where the targets can (no task per call), else a task
        self.call: Start = targets.call if isinstance(targets, Calling) else _InTask(targets)
        self.instants: dict[int, Instant] = {}  # pre-leased runs waiting for their instant
        self.in_flight = 0  # deliveries received and not yet settled
        # loop time until which finishes wait (an instant's burst of calls is being written and
        # answered: its CPU goes to the calls, the finishes follow; Worker._settle_loop)
        self.quiet_until = 0.0
        self.reserved = 0  # room claimed by receives in progress
        self.room = asyncio.Event()
        # an empty queue is polled by one receiver at a time: a receiver whose last receive found
        # nothing takes this first (the others then wait on it, not on the queue)
        self.idle_poll = asyncio.Lock()
        # attempts done and not yet settled, and the settle loop's wake-up (a list: no queue per item)
        self.done: list[tuple[batch_finish.Done, asyncio.Future[Settled]]] = []
        self.settle = asyncio.Event()
        self.running: dict[int, Running] = {}
        # calls of reserved runs whose confirm is not back yet (execution.reserving), and those of
        # them already answered: settled once confirmed, dropped if the confirm was refused
        self.unconfirmed: set[str] = set()
        # run id -> the receipt of the one delivery this worker may start it from until its start is
        # in the store (leased, or confirmed): another copy of its message (SQS delivers at least
        # once) is left alone meanwhile (Holding._claim_starts)
        self.starting: dict[str, str] = {}
        self.parked: dict[str, tuple[batch_finish.Done, asyncio.Future[Settled]]] = {}
        self.tasks: set[asyncio.Task[None]] = set()  # strong references: the loop keeps only weak ones
        self.lane = Lane()  # deliveries due now while runs wait in line for slots (Holding._prepare_due)
        self.turns: dict[str, asyncio.Future[Settled]] = {}  # receipt -> its delivery's, while in the lane


FIRST_ATTEMPT = 1  # what a held run's request is built for (a run held for its instant was never leased)


def prebuild_all(targets: Prebuilding, holding: batch.Holding) -> None:
    """Build the first attempt's request of every held run ahead of its instant."""
    for delivery in holding.deliveries:
        job = holding.jobs[ids.parse_run_id(delivery.run_id)[0]]
        targets.prebuild(job, batch.provisional_run(delivery, job), FIRST_ATTEMPT)


@dataclass(slots=True)
class Instant:
    """The runs held for one instant, leased together when it comes (``Worker._lease_at``)."""

    done: asyncio.Future[bool]  # set once every call of the instant was started (or its delivery settled)
    deliveries: list[Delivery] = field(default_factory=list)
    jobs: dict[str, Job] = field(default_factory=dict)
    runs: dict[tuple[str, int], Run] = field(default_factory=dict)
    reserved: dict[str, Run] = field(default_factory=dict)  # receipt -> the run as reserved
    futures: dict[str, asyncio.Future[Settled]] = field(default_factory=dict)  # receipt -> its delivery's
    closed: bool = False


@dataclass(slots=True)
class Running:
    """An attempt whose target call is in flight: what its heartbeats need, and how to cut it."""

    leased: batch.Leased
    future: asyncio.Future[Settled]  # the delivery's
    started: int  # epoch ms
    next_beat: float
    interval: float
    call: Cancellable | None = None
    lost: bool = False


Start = Callable[[Job, Run, int, float, Reply], Cancellable]


@dataclass(slots=True)
class Armed:
    """An instant's calls made ahead of it (``Worker._arm``): ``runnings`` has one entry per call,
    None where the call is left to start at the instant; ``volley`` holds the others (None: none)."""

    volley: Volley | None
    runnings: list[Running | None]


class _InTask:
    """Starts attempts of targets that only have ``execute`` (test doubles, say): a task each."""

    def __init__(self, targets: AsyncTargetExecutor) -> None:
        self.targets = targets

    def __call__(self, job: Job, run: Run, attempt: int, timeout_s: float, reply: Reply) -> Cancellable:
        return in_task(self.targets.execute(job, run, attempt, timeout_s), reply)


@contextlib.contextmanager
def runner() -> Any:
    """An asyncio runner on uvloop where installed (no global policy change)."""
    try:
        import uvloop

        factory: Callable[[], asyncio.AbstractEventLoop] | None = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux and macOS
        factory = None
    with asyncio.Runner(loop_factory=factory) as loop_runner:
        yield loop_runner


async def beat_loop(state: LoopState, port: batch.Port, options: ExecutionOptions) -> None:
    """One batched heartbeat per tick for the runs whose beat is due; a lost lease cancels its run."""
    tick = max(options.min_heartbeat_s, 0.05)
    while True:
        await asyncio.sleep(tick)
        now = time.monotonic()
        # a reserved run's call before its confirm holds no lease to extend yet (its reservation holds it)
        unconfirmed = state.unconfirmed
        due = [r for r in state.running.values() if r.next_beat <= now and r.leased.delivery.receipt not in unconfirmed]
        if not due:
            continue
        try:
            alive = await state.loop.run_in_executor(state.executor, batch_finish.beat, port, [r.leased for r in due])
        except Exception:  # a transient storage error: the lease margin absorbs a missed beat
            logger.exception("heartbeat of %d runs failed; trying again at the next tick", len(due))
            continue
        for running, ok in zip(due, alive, strict=True):
            if ok:
                running.next_beat = now + running.interval
            elif running.call is not None:
                running.lost = True
                running.call.cancel()
