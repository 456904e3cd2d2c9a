"""A worker killed with SIGKILL in the middle of a run (or of batches: some executing, some waiting for
their instant): another worker takes the runs over (attempt + 1)
and completes it; the run ends succeeded with both attempts in its log (real worker processes, on both
engines: SQLite under tmp_path, and DynamoDB + SQS on a moto server bound to 127.0.0.1).
"""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from punctual.clock import SystemClock
from punctual.model import AttemptOutcome, Run, RunState
from punctual.port import Dispatch
from tests.faults import real_workers
from tests.faults.real_workers import Backend, hook_job, stop
from tests.waiting import eventually

pytestmark = pytest.mark.faults

backend = real_workers.backend  # the fixture: both engines, and how worker processes reach them


def start_worker(backend: Backend, worker_id: str, max_in_flight: int = 1) -> subprocess.Popen[bytes]:
    [proc] = real_workers.start_workers(backend, [worker_id], max_in_flight=max_in_flight, visibility_s=1)
    return proc


class BlockFirst(real_workers.Target):
    """The first request hangs until the test ends (its worker gets killed); later ones answer 200."""

    def do_POST(self) -> None:
        self.read_body()
        with self.server.lock:
            self.server.requests.append(dict(self.headers))
            first = len(self.server.requests) == 1
        if first:
            self.server.release.wait(30)
        self.answer()


@pytest.fixture
def target() -> Iterator[Any]:
    yield from real_workers.serving(BlockFirst, requests=[], lock=threading.Lock(), release=threading.Event())


def test_a_run_whose_worker_is_killed_is_completed_by_another_worker(backend: Backend, target: Any) -> None:
    # Given a run due now whose HTTP target hangs on the first request
    engine = backend.engine
    now = SystemClock().now_ms()
    # max_retries 1: the killed attempt used one retry (as the reaper counts it); the second completes
    job = hook_job(
        target,
        owner="owner-kill",
        name="kill-me",
        schedule="* * * * *",
        max_retries=1,
        now=now,
        next_run_at=now + 3_600_000,
    )
    engine.store.create_job(job)
    run = Run(job_id=job.id, scheduled_at=now, owner=job.owner, deadline_at=now + 120_000, created_at=now)
    engine.store.insert_runs([run])
    engine.queue.send([Dispatch(run.run_id, not_before=now)])
    current = lambda: engine.store.get_run(job.id, now)  # noqa: E731

    # When worker A is killed with SIGKILL while the target is executing the run
    a = start_worker(backend, "worker-a")
    b: subprocess.Popen[bytes] | None = None
    try:
        assert eventually(lambda: len(target.requests) == 1, timeout_s=20), "worker A never called the target"
        a.send_signal(signal.SIGKILL)
        a.wait(timeout=10)
        leased = current()
        assert leased.state is RunState.RUNNING and leased.attempt == 1 and leased.worker_id == "worker-a"

        # Then worker B takes the run over once A's lease has expired, and completes it
        b = start_worker(backend, "worker-b")
        assert eventually(lambda: current().state is RunState.SUCCEEDED, timeout_s=20), current()
        # and B stops gracefully on SIGTERM
        b.send_signal(signal.SIGTERM)
        assert b.wait(timeout=10) == 0
    finally:
        stop([proc for proc in (a, b) if proc is not None])

    done = current()
    assert done.attempt == 2
    assert [(a.number, a.worker_id, a.outcome) for a in done.attempts] == [
        (1, "worker-a", AttemptOutcome.LEASE_EXPIRED),
        (2, "worker-b", AttemptOutcome.SUCCEEDED),
    ]
    assert [(h["Idempotency-Key"], h["X-Punctual-Attempt"]) for h in target.requests] == [
        (run.run_id, "1"),
        (run.run_id, "2"),
    ]
    assert engine.queue.depth() == 0
    assert engine.dead_letters.depth() == 0  # the takeover's redeliveries did not redrive the message


class BlockWhileA(real_workers.Target):
    """Every request hangs until ``release`` is set (worker A is killed meanwhile); then 200."""

    def do_POST(self) -> None:
        self.read_body()
        with self.server.lock:
            self.server.requests.append(dict(self.headers))
        self.server.release.wait(30)
        self.answer()


@pytest.fixture
def blocking_target() -> Iterator[Any]:
    yield from real_workers.serving(BlockWhileA, requests=[], lock=threading.Lock(), release=threading.Event())


def test_a_worker_killed_with_batches_in_flight_and_waiting_loses_no_run_and_repeats_none(
    backend: Backend, blocking_target: Any
) -> None:
    # Given 10 runs due now and 10 due 3 s from now (their messages arrive ~1 s early: the worker
    # pre-leases them on arrival and holds them until their instant)
    engine = backend.engine
    now = SystemClock().now_ms()
    runs: list[Run] = []
    for i in range(20):
        at = now if i < 10 else now + 3_000
        job = hook_job(
            blocking_target,
            owner="owner-kill",
            name=f"batch-{i}",
            schedule="0 0 1 1 *",
            max_retries=1,
            now=now,
            next_run_at=now + 86_400_000,
        )
        engine.store.create_job(job)
        runs.append(Run(job_id=job.id, scheduled_at=at, owner=job.owner, deadline_at=at + 120_000, created_at=now))
    engine.store.insert_runs(runs)
    engine.queue.send(
        [Dispatch(r.run_id, not_before=r.scheduled_at, delay_s=2 if r.scheduled_at > now else 0) for r in runs]
    )
    current = lambda r: engine.store.get_run(r.job_id, r.scheduled_at)  # noqa: E731

    # When worker A (hundreds in flight) is killed while its first batch is executing and the second waits
    a = start_worker(backend, "worker-a", max_in_flight=500)
    b: subprocess.Popen[bytes] | None = None
    try:
        assert eventually(lambda: len(blocking_target.requests) >= 10, timeout_s=30), (
            "worker A never called the targets"
        )
        eventually(lambda: SystemClock().now_ms() >= now + 2_300, timeout_s=5)
        killed_at = SystemClock().now_ms()  # after the second batch's instant if A was slow to start
        a.send_signal(signal.SIGKILL)
        a.wait(timeout=10)
        blocking_target.release.set()

        # Then worker B completes every run: A's executing runs by takeover once their leases expired
        b = start_worker(backend, "worker-b", max_in_flight=500)
        done = lambda: all(current(r).state is RunState.SUCCEEDED for r in runs)  # noqa: E731
        assert eventually(done, timeout_s=60), [current(r).state for r in runs]
        b.send_signal(signal.SIGTERM)
        assert b.wait(timeout=15) == 0
    finally:
        stop([proc for proc in (a, b) if proc is not None])

    calls: dict[str, list[str]] = {}
    for headers in blocking_target.requests:
        calls.setdefault(headers["Idempotency-Key"], []).append(headers["X-Punctual-Attempt"])
    taken_over = 0
    for run in runs:
        final = current(run)
        attempts = [(a.number, a.worker_id, a.outcome) for a in final.attempts]
        # no run lost: each ended succeeded by B; an earlier attempt exists only as A's expired lease
        assert attempts[-1][1:] == ("worker-b", AttemptOutcome.SUCCEEDED), attempts
        assert all(w == "worker-a" and o is AttemptOutcome.LEASE_EXPIRED for _, w, o in attempts[:-1]), attempts
        assert [n for n, _, _ in attempts] == list(range(1, len(attempts) + 1))
        # a pre-leased attempt starts at the run's instant, never before it (nor does its takeover)
        assert final.started_at is not None and final.started_at >= run.scheduled_at, final
        assert all(a.started_at is None or a.started_at >= run.scheduled_at for a in final.attempts), final.attempts
        # none executed twice except by that takeover: the target saw each attempt at most once (A may have
        # died between a lease and its call), and B's attempt exactly once
        seen = calls.get(run.run_id, [])
        if now < run.scheduled_at <= killed_at:  # A (slow to start) called this reserved run, then died
            # before its confirm: that call counted no attempt, and B's call has the same number (a)
            seen = list(dict.fromkeys(seen))
        assert len(seen) == len(set(seen)) and set(seen) <= {str(n) for n, _, _ in attempts}, (run.run_id, seen)
        assert str(attempts[-1][0]) in seen
        taken_over += len(attempts) == 2
    assert taken_over >= 10  # A had called the target 10 times: those runs were taken over after their leases
    assert engine.queue.depth() == 0
    assert engine.dead_letters.depth() == 0
