"""An empty queue is polled by one of the worker's receivers at a time (the others wait on it):
two receivers polling an empty embedded queue cost a worker ~8 ms of CPU a second, one ~4."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from punctual.clock import ManualClock
from punctual.execution.loop import Tuning
from punctual.execution.options import Outcome
from punctual.execution.worker import Worker
from punctual.port import Engine
from tests.contract.test_worker import OPTIONS, Scripted, new_runs, serving, wait_for_successes

pytestmark = pytest.mark.unit


class Polls:
    """Wraps a queue's receive: a long poll of 50 ms, counting the receives in progress at once."""

    def __init__(self, receive: Any) -> None:
        self._receive = receive
        self._lock = threading.Lock()
        self.inside = self.most = self.calls = 0

    def __call__(self, max_messages: int, visibility_s: int, wait_s: float = 0.0) -> Any:
        with self._lock:
            self.inside += 1
            self.calls += 1
            self.most = max(self.most, self.inside)
        try:
            found = self._receive(max_messages, visibility_s, 0.0)
            if not found:
                time.sleep(0.05)  # the long poll's wait (the manual clock would not wait)
            return found
        finally:
            with self._lock:
                self.inside -= 1


def test_an_empty_queue_is_polled_by_one_receiver_at_a_time_and_runs_still_flow(
    embedded_engine: Engine, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    polls = Polls(embedded_engine.queue.receive)
    monkeypatch.setattr(embedded_engine.queue, "receive", polls)
    tuning = Tuning(max_in_flight=10, receive_batch=2, receivers=3, wait_s=0.05)
    worker = Worker(embedded_engine, clock, targets=Scripted, options=OPTIONS, tuning=tuning, worker_id="w1")
    with serving(worker) as stop:
        time.sleep(0.6)
        # Then the empty queue was polled again and again, never by two receivers at once
        assert polls.calls >= 5 and polls.most == 1
        # And runs that arrive are received and executed
        runs = new_runs(embedded_engine, clock, 6)
        wait_for_successes(worker, len(runs), stop)
    assert worker.outcomes[Outcome.SUCCEEDED] == 6 and worker.errors == 0
