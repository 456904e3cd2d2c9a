"""``punctual bench aws``: CPU per run of the async worker, and per claim of the scheduler, on the aws engine.

The figures the capacity model sizes a Fargate worker fleet and the scheduler fleet from
(``worker_cpu_ms_per_run``, ``scheduler_cpu_ms_per_claim`` and ``scheduler_cpu_ms_per_poll`` in
``punctual.capacity.constants``). Separate processes, so that the measured one does only the
measured work: a moto server (DynamoDB and SQS over plain HTTP on 127.0.0.1, where AWS's endpoints
would be: TLS to AWS costs a little more), the no-op HTTP target (``punctual.bench.target``), and
this process, which loads the jobs and runs (not measured) and then runs the measured code.

- **Worker**: one :class:`~punctual.execution.worker.Worker` (the Fargate task's ``punctual worker``)
  until every run succeeded. Measured: this process's CPU time (``time.process_time``: every
  thread, user + system) from the dispatch to the last success, per run, the dispatch's own CPU
  taken out. The worker's idle cost (long polls, timers) is measured first with an empty queue and
  reported apart: moto answers ~100-200 writes a second, so the runs take far longer than on AWS,
  and the idle cost of that extra wall time is moto's. ``cpu_ms_per_run`` is the whole window's
  CPU per run (the upper bound); ``cpu_ms_per_run_net`` subtracts the idle rate.
- **Scheduler**: ``claim_page`` (the scheduler's claim: query, insert, send, advance) over N jobs due
  in one shard, pages of 500, then the same call on an empty shard (the poll each owned shard
  costs every tick). CPU per claimed run and per empty poll.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from punctual import ids
from punctual.clock import SystemClock
from punctual.config import EngineKind, Settings
from punctual.model import HttpTarget, Job, Run
from punctual.port import Dispatch

IDLE_S = 3.0  # the idle measurement's window
MAX_WAIT_S = 600.0  # the burst must finish within this (moto is slow: ~100-200 writes/s)


@contextmanager
def moto_server_process() -> Iterator[str]:
    """The endpoint URL of a moto server (``python -m moto.server``, a test dependency: not in the Lambda
    layer, so started as a command) in its own process on 127.0.0.1, for the ``with`` block."""
    with socket.socket() as probe:  # a free port (moto.server takes no port 0)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()  # noqa: S310 - our own server
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the moto server did not start (is moto[server] installed?)") from None
                time.sleep(0.2)
        yield endpoint
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:  # still busy with the run's last requests: the figures are taken
            process.kill()
            process.wait(10)


@contextmanager
def _aws_environment(endpoint: str) -> Iterator[None]:
    names = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(names)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


def bench_aws(
    runs: int = 300, *, claims: int = 1_000, max_in_flight: int = 1_000, stats_counters: bool = False
) -> dict[str, Any]:
    """Both measurements (see the module docstring), each against a fresh moto server."""
    from punctual.bench.target import noop_target_process

    with moto_server_process() as endpoint, _aws_environment(endpoint):
        scheduler = _measure_scheduler(claims)
    with (
        moto_server_process() as endpoint,
        noop_target_process(0) as target,
        _aws_environment(endpoint),
    ):
        worker = _measure(runs, target.url, max_in_flight=max_in_flight, stats_counters=stats_counters)
    return {"worker": worker, "scheduler": scheduler, "target_request_head_bytes": request_head_bytes()}


def request_head_bytes() -> int:
    """Bytes of one HTTP attempt's request without its body, as the worker writes it (signed, the
    header template of a job without headers of its own): what leaves AWS per attempt besides the
    payload. TCP/IP and TLS framing are not counted."""
    import tempfile
    from pathlib import Path

    from punctual.engines.embedded.keys import LocalKeys
    from punctual.execution.targets import http
    from punctual.execution.targets.aio import AsyncTargets
    from punctual.execution.targets.policy import TargetPolicy
    from punctual.execution.targets.request_rules import target_url
    from punctual.model import RunState

    url = "https://hooks.example.com/v1/punctual"
    with tempfile.TemporaryDirectory(prefix="punctual-head-") as folder:
        keys = LocalKeys(Path(folder) / "secrets.key")
        job = Job(
            id=ids.new_job_id(),
            owner="owner-bytes",
            name="bytes",
            schedule="* * * * *",
            target=HttpTarget(url=url),
            created_at=1,
            updated_at=1,
            next_run_at=60_000,
        )
        run = Run(job_id=job.id, owner=job.owner, scheduled_at=60_000, deadline_at=90_000, created_at=1)
        run = run.model_copy(update={"state": RunState.RUNNING})
        targets = AsyncTargets(TargetPolicy(), keys=keys)
        try:
            request = targets._build(job, run, 1, target_url(url), "192.0.2.10")
        finally:
            targets.close()
    return len(request.data) - len(http.encode_payload(None))


def _settings(prefix: str, **overrides: Any) -> Settings:
    from punctual.engines.aws.bootstrap import ensure_resources

    name = f"{prefix}{uuid.uuid4().hex[:6]}"
    return ensure_resources(Settings(engine=EngineKind.AWS, open_shards=2, name_prefix=name, **overrides))


def _measure_scheduler(count: int) -> dict[str, Any]:
    from punctual.engines.aws import AwsEngine
    from punctual.scheduling.claim import ClaimStats, claim_page

    # one shard: every job due in it, as the busiest instance's shard at the burst
    settings = _settings("claim", shards=1)
    clock = SystemClock()
    engine = AwsEngine(settings, clock=clock, serialize=True)
    try:
        now = clock.now_ms() // 60_000 * 60_000
        for i in range(count):
            job_id = ids.new_job_id()
            engine.store.create_job(
                Job(
                    id=job_id,
                    owner="owner-claim",
                    name=f"claim-{i}",
                    schedule="* * * * *",
                    target=HttpTarget(url="https://example.com/hook"),
                    timeout_s=30,
                    created_at=now,
                    updated_at=now,
                    next_run_at=now,
                    due_shard=0,
                )
            )
        requests = _count_requests(engine.clients.dynamodb, engine.clients.sqs)
        total = ClaimStats()
        cpu, wall = time.process_time(), time.perf_counter()
        while total.advanced < count and time.perf_counter() - wall < MAX_WAIT_S:
            stats = claim_page(engine.store, engine.queue, 0, now, lookahead_ms=5_000, limit=500)
            total.add(stats)
            if not stats.due:
                break
        claim_cpu, claim_s = time.process_time() - cpu, time.perf_counter() - wall
        claim_requests = dict(requests)
        # every job advanced to the next minute: the shard is empty now (until the lookahead reaches it)
        polls = 50
        cpu = time.process_time()
        for _ in range(polls):
            claim_page(engine.store, engine.queue, 0, now, lookahead_ms=5_000, limit=500)
        poll_cpu = time.process_time() - cpu
    finally:
        engine.close()
    if total.advanced < count:
        raise RuntimeError(f"only {total.advanced} of {count} jobs claimed within {MAX_WAIT_S:g} s")
    return {
        "claims": count,
        "claim_seconds_on_moto": round(claim_s, 2),
        "cpu_ms_per_claim": round(claim_cpu / count * 1000, 3),
        "claims_per_cpu_second": round(count / claim_cpu, 1),
        "requests_per_claim": {name: round(n / count, 3) for name, n in sorted(claim_requests.items())},
        "cpu_ms_per_empty_poll": round(poll_cpu / polls * 1000, 3),
    }


def _measure(count: int, url: str, *, max_in_flight: int, stats_counters: bool) -> dict[str, Any]:
    from punctual.engines.aws import AwsEngine
    from punctual.execution.loop import Tuning
    from punctual.execution.options import ExecutionOptions, Outcome
    from punctual.execution.targets.policy import TargetPolicy
    from punctual.execution.worker import Worker

    # the plan's deployment at the mission's load (-c stats_counters=false): a lease and a finish per run
    settings = _settings("cpu", shards=4, stats_counters=stats_counters)
    clock = SystemClock()
    engine = AwsEngine(settings, clock=clock, serialize=True)  # moto is not thread-safe (FACTS.md)
    try:
        runs = _load(engine, count, url, clock.now_ms())
        requests = _count_requests(engine.clients.dynamodb, engine.clients.sqs)
        # the Fargate task's `punctual worker` on the aws engine (cli/worker.py): receives of 100, 8 long polls
        # (5 s here, 20 s there: the stop waits for a poll in progress), the switch interval it sets; a
        # visibility long enough for moto
        sys.setswitchinterval(0.0005)
        tuning = Tuning(max_in_flight=max_in_flight, receive_batch=100, receivers=8, wait_s=5.0)
        options = ExecutionOptions(lease_margin_s=5, visibility_s=900)
        worker = Worker(
            engine, clock, policy=TargetPolicy(allow_loopback=True), options=options, tuning=tuning, worker_id="w"
        )
        stop = threading.Event()
        thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
        thread.start()
        try:
            # idle first: the worker started and polls an empty queue
            stop.wait(1.0)
            idle_cpu, idle_wall = time.process_time(), time.perf_counter()
            stop.wait(IDLE_S)
            idle_rate = (time.process_time() - idle_cpu) / (time.perf_counter() - idle_wall)
            logged = _LogBytes()
            cpu, wall = time.process_time(), time.perf_counter()
            engine.queue.send([Dispatch(run.run_id, not_before=run.scheduled_at) for run in runs])
            sent_cpu = time.process_time() - cpu  # the scheduler's send, not the worker's: taken out
            requests.clear()
            deadline = time.monotonic() + MAX_WAIT_S
            while worker.outcomes[Outcome.SUCCEEDED] < count and time.monotonic() < deadline:
                stop.wait(0.05)
            window_cpu, window_s = time.process_time() - cpu - sent_cpu, time.perf_counter() - wall
            sent_requests = sum(requests.values())
            logged.close()
        finally:
            stop.set()
            thread.join(60)
        succeeded = worker.outcomes[Outcome.SUCCEEDED]
    finally:
        engine.close()
    if succeeded < count:
        raise RuntimeError(f"only {succeeded} of {count} runs succeeded within {MAX_WAIT_S:g} s")
    net = max(0.0, window_cpu - idle_rate * window_s)
    return {
        "runs": count,
        "runs_succeeded": succeeded,
        "stats_counters": stats_counters,
        "window_seconds": round(window_s, 2),
        "runs_per_second_on_moto": round(count / window_s, 1),
        "worker_cpu_seconds": round(window_cpu, 3),
        "idle_cpu_per_second": round(idle_rate, 4),
        "cpu_ms_per_run": round(window_cpu / count * 1000, 3),
        "cpu_ms_per_run_net": round(net / count * 1000, 3),
        "requests_per_run": round(sent_requests / count, 3),
        "log_bytes_per_run": round(logged.bytes / count, 1),
        "requests_by_operation": {name: round(n / count, 3) for name, n in sorted(requests.items())},
    }


class _LogBytes(logging.Handler):
    """Bytes the process logs at INFO (``punctual worker``'s level, cli.common.configure_logging), in
    its format, while installed on the root logger."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self.bytes = 0
        self._root = logging.getLogger()
        self._level = self._root.level
        self._root.setLevel(logging.INFO)
        self._root.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.bytes += len(self.format(record).encode()) + 1

    def close(self) -> None:
        self._root.removeHandler(self)
        self._root.setLevel(self._level)
        super().close()


def _count_requests(*clients: Any) -> Counter[str]:
    """Requests each client sends from now on, by service and operation (botocore's before-call event)."""
    counts: Counter[str] = Counter()

    def record(model: Any, **_: Any) -> None:
        counts[f"{model.service_model.service_name}:{model.name}"] += 1

    for client in clients:
        client.meta.events.register("before-call", record)
    return counts


def _load(engine: Any, count: int, url: str, now: int) -> list[Run]:
    """``count`` jobs calling ``url`` and one run each, due now (written directly, not measured)."""
    runs: list[Run] = []
    for i in range(count):
        job = Job(
            id=ids.new_job_id(),
            owner="owner-cpu",
            name=f"cpu-{i}",
            schedule="0 0 1 1 *",
            target=HttpTarget(url=url),
            timeout_s=30,
            created_at=now,
            updated_at=now,
            next_run_at=now + 86_400_000,
        )
        engine.store.create_job(job)
        runs.append(Run(job_id=job.id, scheduled_at=now, owner=job.owner, deadline_at=now + 600_000, created_at=now))
    engine.store.insert_runs(runs)
    return runs
