"""SQS and DynamoDB requests per run, counted on the wire: the long-running async worker on the aws
engine against a moto server on 127.0.0.1 (every HTTP request botocore sends is counted by a
``before-send`` hook on the engine's own clients).

Budget (DESIGN.md section 6): at most 0.3 SQS requests per run on the worker's happy path. The
figures are printed (``pytest -s``) and kept in docs/benchmarks.md.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from punctual import ids
from punctual.capacity.counts import SQS_PROCESS_WORKER
from punctual.clock import SystemClock
from punctual.config import EngineKind, Settings
from punctual.execution.loop import Tuning
from punctual.execution.options import ExecutionOptions, Outcome
from punctual.execution.targets import TargetResult
from punctual.execution.worker import Worker
from punctual.model import HttpTarget, Job, Run, RunState
from punctual.port import Dispatch

pytestmark = pytest.mark.integration

RUNS = 200
OK = TargetResult(ok=True, status_code=200)


class Accept:
    async def execute(self, job: Job, run: Run, attempt: int, timeout_s: float) -> TargetResult:
        return OK

    def close(self) -> None:
        pass


@pytest.fixture
def moto_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{host}:{port}")
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def count_requests(client: Any, counts: Counter[str], lock: threading.Lock) -> None:
    service = client.meta.service_model.service_name

    def sent(event_name: str, **_: Any) -> None:
        with lock:
            counts[f"{service}.{event_name.rsplit('.', 1)[-1]}"] += 1

    client.meta.events.register("before-send", sent)


def test_the_worker_spends_at_most_0_3_sqs_requests_per_run(moto_server: str, capsys: pytest.CaptureFixture[str]):
    from punctual.engines.aws import AwsEngine
    from punctual.engines.aws.bootstrap import ensure_resources

    settings = ensure_resources(
        Settings(engine=EngineKind.AWS, shards=4, open_shards=2, name_prefix=f"wire{uuid.uuid4().hex[:6]}")
    )
    clock = SystemClock()
    engine = AwsEngine(settings, clock=clock, serialize=True)  # moto is not thread-safe
    try:
        # Given RUNS runs due now, their jobs and runs written (not counted)
        now = clock.now_ms()
        runs = []
        for i in range(RUNS):
            job = Job(
                id=ids.new_job_id(),
                owner="owner-wire",
                name=f"wire-{i}",
                schedule="0 0 1 1 *",
                target=HttpTarget(url="https://example.com/hook"),
                timeout_s=30,
                created_at=now,
                updated_at=now,
                next_run_at=now + 86_400_000,
            )
            engine.store.create_job(job)
            runs.append(
                Run(job_id=job.id, scheduled_at=now, owner=job.owner, deadline_at=now + 120_000, created_at=now)
            )
        engine.store.insert_runs(runs)

        counts: Counter[str] = Counter()
        lock = threading.Lock()
        count_requests(engine.clients.sqs, counts, lock)
        count_requests(engine.clients.dynamodb, counts, lock)
        # When the scheduler's dispatches are sent and one worker executes every run
        engine.queue.send([Dispatch(run.run_id, not_before=now) for run in runs])
        sent = Counter(counts)
        # long polls as on AWS (20 s there; 5 s here bounds how long the stop waits for a poll in progress)
        tuning = Tuning(max_in_flight=1_000, receive_batch=100, receivers=2, wait_s=5.0)
        # received with a long visibility: on a loaded machine moto can take over a minute for 200 runs,
        # and a redelivery would count its receive twice (a slow store, not the happy path)
        options = ExecutionOptions(lease_margin_s=5, visibility_s=600)
        worker = Worker(engine, clock, targets=Accept, options=options, tuning=tuning, worker_id="w")
        stop = threading.Event()
        thread = threading.Thread(target=worker.run, args=(stop,))
        thread.start()
        try:
            for _ in range(1_200):  # bounded: 120 s
                if worker.outcomes[Outcome.SUCCEEDED] >= RUNS:
                    break
                stop.wait(0.1)
            with lock:  # the happy path ends here: idle long polls after the last run are not its cost
                happy = Counter(counts)
        finally:
            stop.set()
            thread.join(60)
        assert worker.outcomes[Outcome.SUCCEEDED] == RUNS
        assert all(engine.store.get_run(r.job_id, r.scheduled_at).state is RunState.SUCCEEDED for r in runs)
    finally:
        engine.close()

    # Then the worker's SQS requests per run stay within the budget
    work = happy - sent
    per_run = {name: round(count / RUNS, 3) for name, count in sorted(work.items())}
    worker_sqs = sum(count for name, count in work.items() if name.startswith("sqs.")) / RUNS
    dispatch_sqs = sum(count for name, count in sent.items() if name.startswith("sqs.")) / RUNS
    dynamodb = sum(count for name, count in work.items() if name.startswith("dynamodb.")) / RUNS
    with capsys.disabled():
        print(
            f"\nper run on the wire ({RUNS} runs): worker {per_run};"
            f" worker SQS {worker_sqs:.3f}, with the dispatch send {worker_sqs + dispatch_sqs:.3f};"
            f" DynamoDB {dynamodb:.3f}"
        )
    assert worker_sqs <= 0.3, (per_run, work)
    # the capacity model prices the worker at what this test measured (punctual.capacity.counts);
    # receives vary with timing (at best 0.1 per run at full batches), hence the tolerance
    model = sum(SQS_PROCESS_WORKER.values())
    assert abs(worker_sqs - model) <= 0.07, (worker_sqs, model)
    assert work["sqs.ChangeMessageVisibility"] == 0 and work["sqs.DeleteMessage"] == 0  # only batch requests
    # GetItem (the job) + UpdateItem (lease, finish, the owner's run statistics) per run
    assert dynamodb <= 4.1, per_run  # (+ a rare duplicate delivery on a loaded machine)
