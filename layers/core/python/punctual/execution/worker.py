"""The long-running worker: N threads that receive dispatch messages and execute their runs.

Used by ``punctual worker`` (one process, any engine: a laptop, a Fargate task) and by
``punctual dev``. Each thread long-polls the dispatch queue for one message at a time (so a busy
thread never holds messages it cannot start) and hands it to
:func:`punctual.execution.delivery.process_delivery`. Stopping is graceful: threads stop receiving, finish
the run in hand, and :meth:`Worker.run` returns when all have.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections import Counter

from punctual.clock import Clock
from punctual.config import DEFAULT_RETENTION_S
from punctual.execution.delivery import RUN_METRICS, ExecutionOptions, Outcome, process_delivery
from punctual.execution.targets import TargetExecutor, TargetPolicy, Targets
from punctual.metrics import Metrics
from punctual.port import Delivery, Engine
from punctual.reaping.reaper import Reaper, ReapOptions
from punctual.runs.alerts import Alerter, LogAlerter

logger = logging.getLogger(__name__)

RECEIVE_ERROR_PAUSE_S = 1.0  # after a failed receive (queue outage), before trying again


def default_worker_id() -> str:
    """``<host>:<pid>``: enough to find the process that ran an attempt."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Worker:
    """``concurrency`` threads executing runs from ``engine.queue`` until stopped.

    ``wait_s`` is the long-poll wait of each receive (1 s locally; up to 20 s on SQS, where
    long polling saves empty receives). It also bounds how long a stop takes when idle.
    Attempts are recorded with worker id ``<worker_id>/<thread number>``.
    """

    name = "worker"

    def __init__(
        self,
        engine: Engine,
        targets: TargetExecutor,
        clock: Clock,
        *,
        concurrency: int = 4,
        options: ExecutionOptions | None = None,
        alerter: Alerter | None = None,
        wait_s: float = 1.0,
        worker_id: str | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.engine, self.targets, self.clock = engine, targets, clock
        self.concurrency = concurrency
        self.options = options or ExecutionOptions()
        self.alerter = alerter or LogAlerter()
        self.wait_s = wait_s
        self.worker_id = worker_id or default_worker_id()
        self.metrics = metrics
        self.outcomes: Counter[Outcome] = Counter()  # what deliveries did, for tests and metrics
        self.errors = 0  # deliveries that raised (their messages come back after the visibility timeout)
        self._lock = threading.Lock()

    def run(self, stop: threading.Event) -> None:
        """Execute runs until ``stop`` is set; returns once every in-flight run has finished."""
        warm_up = getattr(self.targets, "warm_up", None)
        if callable(warm_up):  # so the first run is not late by the targets' one-time setup
            warm_up()
        threads = [
            threading.Thread(target=self._loop, args=(f"{self.worker_id}/{i}", stop), name=f"punctual-worker-{i}")
            for i in range(self.concurrency)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _loop(self, worker_id: str, stop: threading.Event) -> None:
        queue = self.engine.queue
        while not stop.is_set():
            try:
                deliveries = queue.receive(1, self.options.visibility_s, self.wait_s)
            except Exception:
                logger.exception("receive from %s failed", queue.name)
                stop.wait(RECEIVE_ERROR_PAUSE_S)
                continue
            for delivery in deliveries:  # received means ours: finish it even if stop was set meanwhile
                self._process(delivery, worker_id)

    def _process(self, delivery: Delivery, worker_id: str) -> None:
        try:
            outcome = process_delivery(
                delivery,
                store=self.engine.store,
                queue=self.engine.queue,
                targets=self.targets,
                clock=self.clock,
                worker_id=worker_id,
                options=self.options,
                alerter=self.alerter,
                metrics=self.metrics,
            )
        except Exception:  # the message comes back after its visibility timeout; every step is repeatable
            logger.exception("delivery of %s failed", delivery.run_id)
            with self._lock:
                self.errors += 1
            return
        with self._lock:
            self.outcomes[outcome] += 1
        if self.metrics is not None and outcome in RUN_METRICS:
            self.metrics.count(RUN_METRICS[outcome])
        logger.debug("run %s: %s", delivery.run_id, outcome)


def execution_components(
    engine: Engine,
    clock: Clock,
    *,
    lease_margin_s: int = 30,
    concurrency: int = 4,
    allow_loopback: bool = True,
    allow_private: bool = False,
    reap_interval_s: float = 10.0,
    metrics: Metrics | None = None,
    retention_s: int = DEFAULT_RETENTION_S,
) -> list[Worker | Reaper]:
    """The worker and the reaper as components of ``punctual dev`` (each has ``name`` and ``run(stop)``).

    Local defaults: HTTP targets may reach loopback (a service on the same laptop), and the reaper
    looks every 10 s rather than every minute.
    """
    targets = Targets(TargetPolicy(allow_private=allow_private, allow_loopback=allow_loopback))
    options = ExecutionOptions(lease_margin_s=lease_margin_s)
    worker = Worker(engine, targets, clock, concurrency=concurrency, options=options, wait_s=1.0, metrics=metrics)
    reaper = Reaper(engine, clock, options=ReapOptions(retention_s=retention_s), interval_s=reap_interval_s)
    return [worker, reaper]
