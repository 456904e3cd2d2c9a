"""An error after the leases of a batch must not cost their calls (contract (a)).

At the instant, ``batch.prepare`` leases a batch of runs (each lease begins an attempt), then tidies
the queue: it extends the visibility of messages whose lease outlasts it, hides or deletes the
messages of runs it did not lease, gives back concurrency slots, and finishes what a duplicate of a
finished run still owes. Any of those steps can fail without the worker dying (an SQS throttle, a
storage throttle). Before the fix such a failure raised out of ``prepare`` after the leases were
written: the worker then called none of the batch's targets, and each leased run came back only as
a takeover of a lost attempt (with ``max_retries: 0``: ``dead`` and an alert, the target never
called), which breaks "an attempt exists only for a call that began".
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from punctual.clock import ManualClock
from punctual.engines.embedded import EmbeddedEngine
from punctual.errors import Throttled
from punctual.execution import batch
from punctual.execution.options import ExecutionOptions, Outcome
from punctual.model import JobStatus, RunState
from punctual.port import Dispatch, Queue, Store
from punctual.runs.alerts import LogAlerter
from tests.contract.factories import SECOND, drain, make_job, make_run

pytestmark = pytest.mark.faults

OWNER = "owner-queue-errors"


class FailingQueue:
    """The engine's queue, with ``failing`` methods raising :class:`Throttled` (as SQS throttles)."""

    def __init__(self, inner: Queue, failing: Sequence[str]) -> None:
        self.inner, self.failing = inner, set(failing)
        self.failed: list[str] = []

    def __getattr__(self, name: str) -> object:
        if name in self.failing:

            def fail(*args: object, **kwargs: object) -> None:
                self.failed.append(name)
                raise Throttled(f"{name} throttled (injected)")

            return fail
        return getattr(self.inner, name)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def engine(tmp_path: Path, clock: ManualClock) -> Iterator[EmbeddedEngine]:
    engine = EmbeddedEngine(tmp_path / "punctual.db", shards=1, clock=clock)
    yield engine
    engine.close()


@pytest.mark.parametrize("defer_cover", [False, True])
@pytest.mark.parametrize("failing", [["extend_many"], ["delete_many"], ["extend_many", "delete_many"], ["send"]])
def test_leased_runs_are_called_even_if_the_queue_fails_after_their_leases(
    engine: EmbeddedEngine, clock: ManualClock, failing: list[str], defer_cover: bool
) -> None:
    # Given, due now, a run whose lease (300 s + margin) outlasts its message's visibility (60 s),
    # so the lease extends the message (unless the caller covers it after the calls), a run of a
    # deleted job, whose message the batch deletes, and a run another worker holds, whose message
    # the batch hides until that lease ends (or, for a lease longer than a message is held in flight,
    # re-sends with a delay: punctual.execution.waits)
    store = engine.store
    at = clock.now_ms()
    long_job = make_job(OWNER, clock, shards=1, timeout_s=300, max_retries=0)
    gone_job = make_job(OWNER, clock, shards=1, status=JobStatus.DELETED)
    held_job = make_job(OWNER, clock, shards=1)
    for job in (long_job, gone_job, held_job):
        store.create_job(job)
    runs = [make_run(job, at, clock) for job in (long_job, gone_job, held_job)]
    store.insert_runs(runs)
    store.lease_run(held_job.id, at, "w0", at, (90 if "send" in failing else 30) * SECOND)
    engine.queue.send([Dispatch(run.run_id, at) for run in runs])
    deliveries = drain(engine.queue)
    queue = FailingQueue(engine.queue, failing)
    options = ExecutionOptions(lease_margin_s=30, visibility_s=60)
    port = batch.Port(store, queue, engine.finish_and_ack, clock, "w1", options, LogAlerter())  # type: ignore[arg-type]

    # When the batch is leased at the instant, and the queue fails after the lease
    prepared = batch.prepare(port, deliveries, defer_cover=defer_cover)

    # Then the leased run is handed to the worker to call (its attempt has begun), the deleted
    # job's run is cancelled, and the queue's failure only cost a message left as it was
    assert queue.failed, "the injected failure was reached"
    assert [leased.run.run_id for leased in prepared.leased] == [runs[0].run_id]
    assert store.get_run(long_job.id, at).state is RunState.RUNNING
    settled = {d.run_id: o for d, o in prepared.settled}
    assert settled == {runs[1].run_id: Outcome.CANCELLED, runs[2].run_id: Outcome.HELD}
    assert store.get_run(gone_job.id, at).state is RunState.CANCELLED
    # and a message the queue failed to delete comes back later, and is dropped then
    clock.advance(301 * SECOND)  # past the visibility it was received with (drain: 300 s)
    port = batch.Port(store, engine.queue, engine.finish_and_ack, clock, "w1", options, LogAlerter())
    again = batch.prepare(port, [d for d in drain(engine.queue) if d.run_id == runs[1].run_id])
    assert not again.leased and [o for _, o in again.settled] in ([], [Outcome.CANCELLED])


class FailingAlerts:
    """The engine's store, whose alert records fail (a throttled write)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    def record_alert(self, *args: object) -> bool:
        raise Throttled("record_alert throttled (injected)")

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_a_duplicate_whose_debt_fails_does_not_cost_the_calls_of_its_batch(
    engine: EmbeddedEngine, clock: ManualClock
) -> None:
    # Given, due now, a fresh run, and in the same batch a duplicate delivery of a run that ended
    # dead whose owner was not alerted yet (its worker crashed in between)
    store = engine.store
    at = clock.now_ms()
    fresh_job, dead_job = (make_job(OWNER, clock, shards=1, max_retries=0) for _ in range(2))
    for job in (fresh_job, dead_job):
        store.create_job(job)
    fresh = make_run(fresh_job, at, clock)
    dead = make_run(dead_job, at, clock, state=RunState.DEAD, attempt=1)
    store.insert_runs([fresh, dead])
    engine.queue.send([Dispatch(run.run_id, at) for run in (fresh, dead)])
    deliveries = drain(engine.queue)
    options = ExecutionOptions(lease_margin_s=30, visibility_s=60)
    failing = FailingAlerts(store)
    port = batch.Port(failing, engine.queue, engine.finish_and_ack, clock, "w1", options, LogAlerter())  # type: ignore[arg-type]

    # When the batch is leased and the dead run's alert cannot be recorded
    prepared = batch.prepare(port, deliveries)

    # Then the fresh run is leased for its call, and the dead run's message stays for its alert
    assert [leased.run.run_id for leased in prepared.leased] == [fresh.run_id]
    assert dict((d.run_id, o) for d, o in prepared.settled) == {dead.run_id: Outcome.DUPLICATE}
    clock.advance(301 * SECOND)
    assert dead.run_id in [d.run_id for d in drain(engine.queue)]
