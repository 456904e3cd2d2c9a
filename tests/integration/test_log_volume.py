"""What the Lambda functions write to CloudWatch Logs: the capacity model prices it.

The worker handler runs a batch of 10 runs (the SQS event source's batch) on the aws engine against
moto, with the deployed environment's Powertools settings; everything it writes (its EMF metrics and
log lines) is counted, plus Lambda's own START, END and REPORT lines, whose format AWS documents
(``PLATFORM_LINES_BYTES``): ``lambda_log_bytes_per_invocation``. The scheduler handler ticks for a
second or two: the EMF document it flushes after each tick is ``scheduler_log_bytes_per_tick``
(a minute's invocation ticks 60 times). Each constant in ``punctual.capacity.constants`` must be
the figure measured here (within 15 %: timestamps and values vary).
"""

from __future__ import annotations

import pytest

from punctual.capacity.constants import value
from punctual.clock import SystemClock
from punctual.execution.targets import TargetResult
from punctual.model import Job, Run
from punctual.port import Engine
from tests.integration.conftest import Context, load
from tests.integration.test_execution_handlers import new_run, sqs_event

pytestmark = pytest.mark.integration

BATCH = 10
# START RequestId: <uuid> Version: $LATEST / END RequestId: <uuid> / REPORT RequestId: <uuid> Duration: ...
# Billed Duration: ... Memory Size: 512 MB Max Memory Used: ... MB (+ Init Duration on a cold start) and,
# with active tracing, XRAY TraceId: ... SegmentId: ... Sampled: ...
PLATFORM_LINES_BYTES = 340


class Succeed:
    async def execute(self, job: Job, run: Run, attempt: int, timeout_s: float) -> TargetResult:
        return TargetResult(ok=True, status_code=204)

    def close(self) -> None:
        pass


def test_a_worker_invocation_writes_what_the_model_prices(engine: Engine, capfd: pytest.CaptureFixture[str]) -> None:
    handler = load("worker")
    handler._worker().targets = Succeed
    for i in range(BATCH):
        new_run(engine, f"log-{i}")
    capfd.readouterr()  # the set-up's output is not the invocation's

    response = handler.handler(sqs_event(engine.queue, BATCH), Context())

    assert response == {"batchItemFailures": []}
    out, err = capfd.readouterr()
    written = len(out.encode()) + len(err.encode())
    measured = written + PLATFORM_LINES_BYTES
    print(
        f"\nworker invocation of {BATCH} runs: {written} bytes written + {PLATFORM_LINES_BYTES} platform = {measured}"
    )
    assert measured == pytest.approx(value("lambda_log_bytes_per_invocation"), rel=0.15)


def test_a_scheduler_tick_writes_what_the_model_prices(engine: Engine, capfd: pytest.CaptureFixture[str]) -> None:
    from tests.integration.test_scheduler_handler import ShortContext, _event_time

    handler = load("scheduler")
    capfd.readouterr()
    minute = SystemClock().now_ms() // 60_000
    handler.handler({"instance": 0, "instances": 1, "time": _event_time(minute)}, ShortContext())
    out, _ = capfd.readouterr()
    emf = [line for line in out.splitlines() if '"_aws"' in line]  # one EMF document flushed after each tick
    assert emf
    per_tick = sum(len(line.encode()) + 1 for line in emf) / len(emf)
    print(f"\nscheduler: {len(emf)} ticks, {per_tick:.0f} bytes of EMF per tick")
    assert per_tick == pytest.approx(value("scheduler_log_bytes_per_tick"), rel=0.15)
