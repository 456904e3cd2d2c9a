"""Workers report start lateness (lease time - scheduled time) for the StartLatenessP99 alarm, on both
engines: once per run, on its first attempt (a retry starts at its backoff, not at its instant)."""

from __future__ import annotations

import pytest

from punctual import metrics as m
from punctual.execution.delivery import process_delivery
from punctual.execution.options import Outcome
from punctual.metrics import InMemoryMetrics
from tests.contract.test_execution import BOOM, OK, OPTIONS, FakeTargets, create_job, receive_one, schedule_run

pytestmark = pytest.mark.contract


def test_the_first_attempt_reports_its_start_lateness_and_a_retry_does_not(engine, engine_kind, clock, elapse):
    # Given a run scheduled now, whose target fails once
    job = create_job(engine, clock, max_retries=2)
    schedule_run(engine, clock, job)
    sink = InMemoryMetrics()
    targets = FakeTargets(BOOM, OK)

    def deliver() -> Outcome:
        return process_delivery(
            receive_one(engine, engine_kind),
            store=engine.store,
            queue=engine.queue,
            targets=targets,
            clock=clock,
            worker_id="w1",
            options=OPTIONS,
            metrics=sink,
        )

    # When a worker leases it 250 ms after its instant, and retries it after the backoff
    clock.advance(250)
    assert deliver() is Outcome.RETRYING
    elapse(1.2)
    assert deliver() is Outcome.SUCCEEDED
    # Then exactly one sample: the first lease's lateness
    assert list(sink.samples[m.START_LATENESS_MS]) == [250]
