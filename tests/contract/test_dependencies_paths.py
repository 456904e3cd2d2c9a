"""Releases on every path where a run turns terminal: the worker's finish, a redelivered finish,
the reaper's burial and the dead-letter queue; with crashes between the terminal write and the
release (the release hook raising, as a process dying there would leave things)."""

from __future__ import annotations

from typing import Any

import pytest

from punctual import metrics as m
from punctual.clock import ManualClock
from punctual.execution.options import Outcome
from punctual.jobs import service
from punctual.metrics import InMemoryMetrics
from punctual.model import HttpTarget, Job, JobSpec, RetryPolicy, Run, RunState, Trigger
from punctual.port import Dispatch, Engine, RunQuery
from tests.contract.factories import MINUTE, SECOND, make_run
from tests.contract.test_dependencies import Crash, Crashing
from tests.contract.test_execution import (
    BOOM,
    GONE,
    OK,
    FakeTargets,
    RecordingAlerter,
    process,
    reap,
    receive_one,
    stored,
)

pytestmark = pytest.mark.contract

OWNER = "owner-exec"  # the owner test_execution's helpers use
HTTP = HttpTarget(url="https://example.com/hook")


@pytest.fixture
def alerter() -> RecordingAlerter:
    return RecordingAlerter()


def job(engine: Engine, clock: ManualClock, name: str, upstreams: list[Job] | None = None, **fields: Any) -> Job:
    body: dict[str, Any] = {"name": name, "target": HTTP.model_dump(), "timeout_s": 5, **fields}
    body.setdefault("retry", RetryPolicy(backoff_s=1, max_backoff_s=1).model_dump())
    if upstreams is None and "depends_on" not in fields:
        body["schedule"] = "0 0 * * *"
    elif upstreams is not None:
        body["depends_on"] = {"jobs": [u.id for u in upstreams]}
    return service.create_job(engine.store, OWNER, JobSpec.model_validate(body), clock.now_ms()).job


def start(engine: Engine, clock: ManualClock, upstream: Job, *, send: bool = True) -> Run:
    run = make_run(upstream, clock.now_ms(), clock, trigger=Trigger.MANUAL)
    assert engine.store.insert_runs([run]) == [True]
    if send:
        engine.queue.send([Dispatch(run.run_id, not_before=run.scheduled_at)])
    return run


def runs_of(engine: Engine, job: Job) -> list[Run]:
    return engine.store.list_runs(job.id, RunQuery(limit=100)).items


def test_the_worker_runs_a_chain_of_three(engine, engine_kind, clock, alerter):
    a = job(engine, clock, "extract")
    b = job(engine, clock, "transform", [a])
    c = job(engine, clock, "load", [b])
    start(engine, clock, a)
    sink = InMemoryMetrics()
    for expected in (a, b, c):  # each finish sends the next job's run
        delivery = receive_one(engine, engine_kind)
        assert delivery.run_id.startswith("run_" + expected.id[4:])
        assert process(engine, clock, delivery, FakeTargets(OK), alerter, metrics=sink) is Outcome.SUCCEEDED
        clock.advance(SECOND)
    # the released runs count as dispatched, as the scheduler's do (issue 31: punctual dev's status line)
    assert sink.counters[m.RUNS_DISPATCHED] == 2
    (b_run,) = runs_of(engine, b)
    (c_run,) = runs_of(engine, c)
    assert b_run.state is RunState.SUCCEEDED and b_run.trigger is Trigger.DEPENDENCY
    assert c_run.state is RunState.SUCCEEDED and c_run.released_by == [b_run.run_id]
    assert engine.queue.receive(10, 60) == []


def test_a_failed_upstream_releases_only_failure_handlers(engine, engine_kind, clock, alerter):
    a = job(engine, clock, "a", max_retries=0)
    on_success = job(engine, clock, "next", [a])
    on_failure = job(engine, clock, "cleanup", None, depends_on={"jobs": [a.id], "when": "failed"})
    start(engine, clock, a)
    assert process(engine, clock, receive_one(engine, engine_kind), FakeTargets(GONE), alerter) is Outcome.FAILED
    assert runs_of(engine, on_success) == [] and len(runs_of(engine, on_failure)) == 1
    assert receive_one(engine, engine_kind).run_id == runs_of(engine, on_failure)[0].run_id


def test_a_crash_after_the_finish_is_released_by_the_redelivery(engine, engine_kind, clock, alerter, elapse):
    a = job(engine, clock, "a")
    b = job(engine, clock, "b", [a])
    run = start(engine, clock, a)
    crashing: Any = Crashing(engine.store, "dependents_of")
    from punctual.execution.delivery import process_delivery
    from tests.contract.test_execution import OPTIONS

    delivery = receive_one(engine, engine_kind, visibility_s=1)
    with pytest.raises(Crash):  # finished, then "died" before releasing: the message stays
        process_delivery(
            delivery, store=crashing, queue=engine.queue, targets=FakeTargets(OK), clock=clock,
            worker_id="w1", options=OPTIONS, alerter=alerter,
        )  # fmt: skip
    assert stored(engine, run).state is RunState.SUCCEEDED and runs_of(engine, b) == []
    elapse(1.5)
    outcome = process(engine, clock, receive_one(engine, engine_kind), FakeTargets(OK), alerter)
    assert outcome is Outcome.DUPLICATE  # the run was finished: only what it owed is done
    (released,) = runs_of(engine, b)
    assert released.released_by == [run.run_id]
    assert receive_one(engine, engine_kind).run_id == released.run_id


@pytest.mark.parametrize("crash", [False, True])
def test_the_reaper_burial_releases_failure_handlers(engine, engine_kind, clock, alerter, crash):
    a = job(engine, clock, "a", max_retries=0)
    cleanup = job(engine, clock, "cleanup", None, depends_on={"jobs": [a.id], "when": "failed"})
    run = start(engine, clock, a, send=False)
    engine.store.lease_run(run.job_id, run.scheduled_at, "ghost", clock.now_ms(), 6 * SECOND)
    clock.advance(2 * MINUTE)
    if crash:  # buried, then the reaper died before releasing
        from punctual.reaping.reaper import ReapOptions, reap_once

        crashing: Any = Crashing(engine.store, "dependents_of")
        stats = reap_once(crashing, engine.queue, engine.dead_letters, alerter, clock, options=ReapOptions())
        assert stats.errors == 1 and stored(engine, run).state is RunState.DEAD and runs_of(engine, cleanup) == []
        # the message it sent before burying brings the release
        outcome = process(engine, clock, receive_one(engine, engine_kind), FakeTargets(OK), alerter)
        assert outcome is Outcome.DUPLICATE
    else:
        assert reap(engine, clock, alerter).dead == 1
    (released,) = runs_of(engine, cleanup)
    assert released.released_by == [run.run_id]
    # what is left on the queue: the cleanup's run and (no crash) the burial's own message, which
    # finds its run dead and releases nothing twice
    outcomes = []
    for _ in range(1 if crash else 2):
        outcomes.append(process(engine, clock, receive_one(engine, engine_kind), FakeTargets(OK), alerter))
    assert sorted(outcomes) == sorted([Outcome.SUCCEEDED] + ([] if crash else [Outcome.DUPLICATE]))
    assert len(runs_of(engine, cleanup)) == 1 and stored(engine, released).state is RunState.SUCCEEDED


def test_a_dead_lettered_run_releases_failure_handlers(engine, engine_kind, clock, alerter):
    a = job(engine, clock, "a")
    cleanup = job(engine, clock, "cleanup", None, depends_on={"jobs": [a.id], "when": "finished"})
    run = start(engine, clock, a, send=False)
    engine.dead_letters.send([Dispatch(run.run_id, not_before=run.scheduled_at)])
    assert reap(engine, clock, alerter).dead == 1
    (released,) = runs_of(engine, cleanup)
    assert released.released_by == [run.run_id]
    engine.dead_letters.send([Dispatch(run.run_id, not_before=run.scheduled_at)])  # a second copy
    reap(engine, clock, alerter)
    assert len(runs_of(engine, cleanup)) == 1


def test_retrying_upstream_releases_only_when_it_finally_succeeds(engine, engine_kind, clock, alerter, elapse):
    a = job(engine, clock, "a", max_retries=2)
    b = job(engine, clock, "b", [a])
    start(engine, clock, a)
    targets = FakeTargets(BOOM, OK)
    assert process(engine, clock, receive_one(engine, engine_kind), targets, alerter) is Outcome.RETRYING
    assert runs_of(engine, b) == []
    elapse(1.5)
    assert process(engine, clock, receive_one(engine, engine_kind), targets, alerter) is Outcome.SUCCEEDED
    assert len(runs_of(engine, b)) == 1


# -- the async batched worker (punctual.execution.worker / batch) ---------------------------------


def _async_worker(engine: Any, clock: ManualClock) -> Any:
    from tests.contract.test_worker import Scripted, worker

    return worker(engine, clock, Scripted())


def _process_async(w: Any, deliveries: list[Any]) -> list[Any]:
    from tests.contract.test_worker import process as process_batch

    return process_batch(w, deliveries)


def test_the_batched_worker_runs_a_chain_and_a_fan_in(engine, engine_kind, clock):
    a, b = job(engine, clock, "a"), job(engine, clock, "b")
    c = job(engine, clock, "c", [a])
    d = job(engine, clock, "d", [a, b])
    start(engine, clock, a), start(engine, clock, b)
    w = _async_worker(engine, clock)
    for _ in range(3):  # a and b, then c and d, then nothing
        deliveries = engine.queue.receive(10, 60, 0.0 if engine_kind == "embedded" else 1.0)
        if not deliveries:
            break
        assert set(_process_async(w, deliveries)) == {Outcome.SUCCEEDED}
        clock.advance(SECOND)
    (c_run,) = runs_of(engine, c)
    (d_run,) = runs_of(engine, d)
    assert c_run.state is RunState.SUCCEEDED and d_run.state is RunState.SUCCEEDED
    assert len(d_run.released_by or []) == 2
    assert engine.queue.receive(10, 60) == []


def test_the_batched_worker_keeps_the_message_until_the_release_is_done(engine, engine_kind, clock, elapse):
    from types import SimpleNamespace

    a = job(engine, clock, "a")
    b = job(engine, clock, "b", [a])
    run = start(engine, clock, a)
    crashing = SimpleNamespace(
        store=Crashing(engine.store, "dependents_of"), queue=engine.queue, finish_and_ack=engine.finish_and_ack
    )
    outcomes = _process_async(_async_worker(crashing, clock), [receive_one(engine, engine_kind, visibility_s=1)])
    assert isinstance(outcomes[0], Crash)  # finished, then failed before releasing: the message stays
    assert stored(engine, run).state is RunState.SUCCEEDED and runs_of(engine, b) == []
    elapse(1.5)
    assert _process_async(_async_worker(engine, clock), [receive_one(engine, engine_kind)]) == [Outcome.DUPLICATE]
    (released,) = runs_of(engine, b)
    assert released.released_by == [run.run_id]


@pytest.mark.parametrize(
    ("overlap", "outcome", "earlier"),
    [("forbid", Outcome.SKIPPED, RunState.RUNNING), ("replace", Outcome.SUCCEEDED, RunState.CANCELLED)],
)
def test_a_released_run_honours_its_jobs_overlap_at_its_lease(
    engine, engine_kind, clock, alerter, overlap, outcome, earlier
):
    # Given a dependent whose earlier run is still running when its upstream releases a new one
    a = job(engine, clock, "a")
    b = job(engine, clock, "b", [a], overlap=overlap)
    running = start(engine, clock, b, send=False)
    engine.store.lease_run(running.job_id, running.scheduled_at, "another-worker", clock.now_ms(), 10 * MINUTE)
    clock.advance(SECOND)
    start(engine, clock, a)
    assert process(engine, clock, receive_one(engine, engine_kind), FakeTargets(OK), alerter) is Outcome.SUCCEEDED
    released = next(r for r in runs_of(engine, b) if r.trigger is Trigger.DEPENDENCY)
    # Then the worker decides the overlap when it leases the released run, as for a scheduled one
    delivery = receive_one(engine, engine_kind)
    assert delivery.run_id == released.run_id
    assert process(engine, clock, delivery, FakeTargets(OK), alerter) is outcome
    assert stored(engine, running).state is earlier
