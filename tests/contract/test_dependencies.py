"""Job dependencies (``punctual.dependencies``) on both engines: edges, release records, releases.

Upstream runs are written terminal straight into the store and offered with the release hook
(the same call the worker and the reaper make); tests/contract/test_dependencies_paths.py drives
the worker and the reaper themselves.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Any

import pytest

from punctual.clock import ManualClock
from punctual.dependencies.release import release_dependents
from punctual.errors import (
    ConcurrentModification,
    DependencyCycle,
    HasDependents,
    InvalidInput,
    JobAlreadyExists,
    JobNotFound,
)
from punctual.jobs import lifecycle, service
from punctual.model import DependsOn, HttpTarget, Job, JobSpec, JobStatus, Run, RunState, Trigger
from punctual.port import EdgeChange, EdgeReads, Engine, ReleaseSlot, RunQuery, Store
from tests.contract.factories import SECOND, drain, make_run

pytestmark = pytest.mark.contract

OWNER = "owner-deps"
HTTP = HttpTarget(url="https://example.com/hook")


def cron_job(store: Store, clock: ManualClock, name: str, owner: str = OWNER) -> Job:
    spec = JobSpec(name=name, schedule="0 0 * * *", target=HTTP)
    return service.create_job(store, owner, spec, clock.now_ms()).job


def dependent(store: Store, clock: ManualClock, name: str, upstreams: list[Job], when: str = "succeeded") -> Job:
    spec = JobSpec.model_validate(
        {"name": name, "depends_on": {"jobs": [u.id for u in upstreams], "when": when}, "target": HTTP.model_dump()}
    )
    return service.create_job(store, OWNER, spec, clock.now_ms()).job


def finish(engine: Engine, clock: ManualClock, job: Job, state: RunState = RunState.SUCCEEDED) -> tuple[Run, list[Run]]:
    """A run of ``job`` that ended ``state`` now, offered to its dependents; (run, released runs)."""
    clock.advance(SECOND)
    now = clock.now_ms()
    run = make_run(job, now - 500, clock, state=state, finished_at=now, trigger=Trigger.MANUAL)
    assert engine.store.insert_runs([run]) == [True]
    return run, offer(engine, run, now)


def offer(engine: Engine, run: Run, now: int) -> list[Run]:
    upstream = engine.store.get_job(run.job_id)
    return release_dependents(engine.store, engine.queue, upstream, run, now)


def runs_of(store: Store, job: Job) -> list[Run]:
    return store.list_runs(job.id, RunQuery(limit=100)).items


# -- the port ------------------------------------------------------------------------------------


def test_reverse_edges_are_one_listing_per_upstream(store: Store) -> None:
    a, b, d1, d2 = (f"job_{c * 32}" for c in "abcd")
    store.link_dependent(d2, [a, b])
    store.link_dependent(d1, [a])
    store.link_dependent(d1, [a])  # idempotent
    assert store.dependents_of(a) == sorted([d1, d2])
    assert store.dependents_of(b) == [d2]
    store.unlink_dependent(d2, [a, b, "job_" + "e" * 32], 1_000)  # absent edges are ignored
    assert store.dependents_of(a) == [d1]
    assert store.dependents_of(b) == []
    store.link_dependent(d2, [b])  # a link after an unlink is live again
    assert store.dependents_of(b) == [d2]


def test_release_record_fills_once_per_upstream_and_completes_by_generation(store: Store) -> None:
    d = "job_" + "d" * 32
    empty = store.get_release(d)
    assert (empty.generation, empty.released_at, empty.slots) == (0, None, ())
    first = ReleaseSlot("job_" + "a" * 32, "run_a_1", 1_000)
    applied, state = store.fill_release(d, first)
    assert applied and state.slots == (first,)
    applied, state = store.fill_release(d, ReleaseSlot(first.upstream_id, "run_a_2", 2_000))
    assert not applied and state.slot(first.upstream_id) == first  # the first run holds the slot
    second = ReleaseSlot("job_" + "b" * 32, "run_b_1", 1_500)
    applied, state = store.fill_release(d, second)
    assert applied and {s.run_id for s in state.slots} == {"run_a_1", "run_b_1"}

    assert store.complete_release(state, 1_500)
    assert not store.complete_release(state, 1_500)  # a second completer lost: generation moved on
    after = store.get_release(d)
    assert (after.generation, after.released_at, after.slots) == (1, 1_500, ())
    applied, _ = store.fill_release(d, ReleaseSlot(first.upstream_id, "run_a_old", 1_500))
    assert not applied  # finished at or before the last release: stale
    applied, state = store.fill_release(d, ReleaseSlot(first.upstream_id, "run_a_3", 1_501))
    assert applied and state.generation == 1


def _decision(change: EdgeChange | None, read: list[str] | None = None) -> Callable[[EdgeReads], EdgeChange | None]:
    def decide(reads: EdgeReads) -> EdgeChange | None:
        if read:
            reads.edges(read)
        return change

    return decide


def test_a_decision_writes_the_job_its_edges_and_its_new_upstreams_at_once(store: Store, clock: ManualClock) -> None:
    up, old = cron_job(store, clock, "up"), cron_job(store, clock, "old")
    down = dependent(store, clock, "down", [old])
    moved = down.model_copy(update={"depends_on": DependsOn(jobs=[up.id]), "updated_at": clock.now_ms()})
    change = EdgeChange(moved, down.version, linked=(up.id,), unlinked=(old.id,))
    stored = store.decide_edges(OWNER, _decision(change, read=[up.id]))
    assert stored is not None and stored.version == down.version + 1
    assert store.get_job(down.id) == stored
    marked = store.get_job(up.id)
    assert marked.has_dependents and marked.version == up.version + 1  # a delete that read before is refused
    assert store.dependents_of(up.id) == [down.id] and store.dependents_of(old.id) == []


def test_a_refused_decision_writes_nothing(store: Store, clock: ManualClock) -> None:
    up, gone = cron_job(store, clock, "up"), cron_job(store, clock, "gone")
    lifecycle.delete_job(store, OWNER, gone.id, clock.now_ms())
    down = dependent(store, clock, "down", [up])
    renamed = down.model_copy(update={"name": "renamed"})
    refusals: list[tuple[EdgeChange, type[Exception]]] = [
        (EdgeChange(renamed, down.version - 1), ConcurrentModification),  # stale version
        (EdgeChange(renamed.model_copy(update={"id": "job_" + "0" * 32}), 1), JobNotFound),  # no such job
        (EdgeChange(renamed, None, linked=(up.id,)), JobAlreadyExists),  # a create of an existing id
        (EdgeChange(renamed, down.version, linked=(gone.id,)), ConcurrentModification),  # a deleted upstream
    ]
    for change, error in refusals:
        with pytest.raises(error):
            store.decide_edges(OWNER, _decision(change))
    assert store.decide_edges(OWNER, _decision(None)) is None  # nothing to write

    def failing(reads: EdgeReads) -> EdgeChange:
        raise DependencyCycle("refused by the check")

    with pytest.raises(DependencyCycle):
        store.decide_edges(OWNER, failing)
    assert store.get_job(down.id) == down and store.dependents_of(gone.id) == []
    assert not store.get_job(gone.id).has_dependents


def test_a_decision_that_fails_while_writing_leaves_nothing_behind(
    store: Store, clock: ManualClock, engine_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A crash anywhere in the write: embedded, the last statement of the transaction fails after the
    # job row and the upstream's flag were written; aws, the one request is lost on the way.
    up, down = cron_job(store, clock, "up"), cron_job(store, clock, "down")
    error: type[Exception]
    if engine_kind == "embedded":
        monkeypatch.setattr("punctual.engines.embedded.edges._LINK", "INSERT INTO no_such_table VALUES (?, ?)")
        error = sqlite3.OperationalError
    else:
        from botocore.exceptions import EndpointConnectionError

        def lost(**_: Any) -> Any:
            raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9")

        monkeypatch.setattr(store._tables.client, "transact_write_items", lost)  # type: ignore[attr-defined]
        error = EndpointConnectionError
    changes = {"schedule": None, "depends_on": {"jobs": [up.id]}}
    with pytest.raises(error):
        service.update_job(store, OWNER, down.id, changes, clock.now_ms())
    assert store.get_job(down.id) == down and store.get_job(up.id) == up
    assert store.dependents_of(up.id) == []


# -- releases ------------------------------------------------------------------------------------


def test_chain_releases_each_downstream_once_with_a_derived_run(engine: Engine, clock: ManualClock) -> None:
    store = engine.store
    extract = cron_job(store, clock, "extract")
    transform = dependent(store, clock, "transform", [extract])
    load = dependent(store, clock, "load", [transform])
    assert store.get_job(extract.id).has_dependents and not store.get_job(load.id).has_dependents
    assert transform.next_run_at is None and transform.status is JobStatus.ACTIVE

    run, released = finish(engine, clock, extract)
    assert len(released) == 1
    t_run = released[0]
    assert (t_run.job_id, t_run.trigger, t_run.released_by) == (transform.id, Trigger.DEPENDENCY, [run.run_id])
    assert t_run.scheduled_at == run.finished_at  # the release moment
    assert [d.run_id for d in drain(engine.queue)] == [t_run.run_id]

    assert offer(engine, run, clock.now_ms()) == [] and len(runs_of(store, transform)) == 1  # a repeat
    assert runs_of(store, load) == []
    t_done, released = finish(engine, clock, store.get_job(transform.id))
    assert [r.job_id for r in released] == [load.id] and released[0].released_by == [t_done.run_id]


def test_diamond_releases_fan_in_only_when_every_upstream_ran(engine: Engine, clock: ManualClock) -> None:
    store = engine.store
    a = cron_job(store, clock, "a")
    b, c = dependent(store, clock, "b", [a]), dependent(store, clock, "c", [a])
    d = dependent(store, clock, "d", [b, c])

    _, released = finish(engine, clock, a)
    assert sorted(r.job_id for r in released) == sorted([b.id, c.id])
    b_run, released = finish(engine, clock, store.get_job(b.id))
    assert released == []  # c has not run since
    _, released = finish(engine, clock, store.get_job(b.id))
    assert released == []  # the slot keeps b's first run
    c_run, released = finish(engine, clock, store.get_job(c.id))
    assert len(released) == 1 and sorted(released[0].released_by or []) == sorted([b_run.run_id, c_run.run_id])
    assert released[0].scheduled_at == c_run.finished_at
    _, released = finish(engine, clock, store.get_job(c.id))
    assert released == [] and len(runs_of(store, d)) == 1  # the next release needs b again


@pytest.mark.parametrize(
    ("when", "releasing"),
    [
        ("succeeded", {RunState.SUCCEEDED}),
        ("finished", {RunState.SUCCEEDED, RunState.FAILED, RunState.DEAD}),
        ("failed", {RunState.FAILED, RunState.DEAD}),
    ],
)
def test_each_when_releases_on_its_states(
    engine: Engine, clock: ManualClock, when: str, releasing: set[RunState]
) -> None:
    store = engine.store
    up = cron_job(store, clock, "up")
    down = dependent(store, clock, "down", [up], when=when)
    for state in (RunState.SUCCEEDED, RunState.FAILED, RunState.DEAD, RunState.CANCELLED):
        _, released = finish(engine, clock, store.get_job(up.id), state)
        assert (len(released) == 1) == (state in releasing), state
    assert len(runs_of(store, down)) == len(releasing)


def test_concurrent_finishes_of_the_last_two_upstreams_give_one_run(engine: Engine, clock: ManualClock) -> None:
    store = engine.store
    a, b = cron_job(store, clock, "a"), cron_job(store, clock, "b")
    d = dependent(store, clock, "d", [a, b])
    for _ in range(3):  # three rounds of racing finishes
        now = clock.now_ms() + SECOND
        clock.set(now)
        runs = [
            make_run(j, now - 10, clock, state=RunState.SUCCEEDED, finished_at=now - i) for i, j in enumerate([a, b])
        ]
        store.insert_runs(runs)
        assert len(_race(engine, runs, now)) == 2
    dependent_runs = runs_of(store, d)
    assert len(dependent_runs) == 3 and len({r.run_id for r in dependent_runs}) == 3
    assert store.get_release(d.id).generation == 3


def _race(engine: Engine, runs: list[Run], now: int) -> list[list[Run]]:
    """Offer each run from its own thread, all at once; what each offer released."""
    barrier = threading.Barrier(len(runs))
    results: list[list[Run]] = []

    def go(run: Run) -> None:
        barrier.wait(5)
        results.append(offer(engine, run, now))

    threads = [threading.Thread(target=go, args=(r,)) for r in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


class Crash(Exception):
    pass


class Crashing:
    """Wraps a store or queue; raises :class:`Crash` on the ``n``-th call of ``method``."""

    def __init__(self, inner: Any, method: str, n: int = 1) -> None:
        self._inner, self._method, self._left = inner, method, n

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name != self._method:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self._left -= 1
            if self._left == 0:
                raise Crash(name)
            return attr(*args, **kwargs)

        return call


STEPS: list[tuple[str, str]] = [
    ("store", "dependents_of"),
    ("store", "get_release"),
    ("store", "fill_release"),
    ("store", "insert_runs"),
    ("queue", "send"),
    ("store", "complete_release"),
]


@pytest.mark.parametrize(("where", "method"), STEPS)
def test_a_crash_at_any_step_loses_no_release_and_makes_no_second_run(
    engine: Engine, clock: ManualClock, where: str, method: str
) -> None:
    store = engine.store
    a, b = cron_job(store, clock, "a"), cron_job(store, clock, "b")
    d = dependent(store, clock, "d", [a, b])
    _, released = finish(engine, clock, a)
    assert released == []
    clock.advance(SECOND)
    now = clock.now_ms()
    last = make_run(b, now - 10, clock, state=RunState.SUCCEEDED, finished_at=now)
    store.insert_runs([last])
    crashing_store: Any = Crashing(store, method) if where == "store" else store
    crashing_queue: Any = Crashing(engine.queue, method) if where == "queue" else engine.queue
    with pytest.raises(Crash):
        release_dependents(crashing_store, crashing_queue, store.get_job(b.id), last, now)
    # the finish's evidence (its message) is still there: the hook runs again on redelivery
    released = offer(engine, last, now)
    assert len(released) == 1
    assert len(runs_of(store, d)) == 1
    assert released[0].run_id in {m.run_id for m in drain(engine.queue)}
    assert offer(engine, last, now) == [] and len(runs_of(store, d)) == 1


def test_paused_dependent_drops_releases_and_resume_does_not_backfill(engine: Engine, clock: ManualClock) -> None:
    store = engine.store
    up = cron_job(store, clock, "up")
    down = dependent(store, clock, "down", [up])
    lifecycle.pause_job(store, OWNER, down.id, clock.now_ms())
    _, released = finish(engine, clock, up)
    assert released == [] and store.get_release(down.id).generation == 1  # consumed, dropped
    resumed = lifecycle.resume_job(store, OWNER, down.id, clock.now_ms())
    assert resumed.status is JobStatus.ACTIVE and resumed.next_run_at is None
    assert runs_of(store, down) == []
    _, released = finish(engine, clock, up)
    assert [r.job_id for r in released] == [down.id]


def test_jobs_without_dependents_pay_no_store_call(engine: Engine, clock: ManualClock) -> None:
    calls: list[str] = []

    class Counting:
        def __getattr__(self, name: str) -> Callable[..., Any]:
            calls.append(name)
            return getattr(engine.store, name)

    lonely = cron_job(engine.store, clock, "lonely")
    run = make_run(lonely, clock.now_ms(), clock, state=RunState.SUCCEEDED, finished_at=clock.now_ms())
    assert release_dependents(Counting(), engine.queue, lonely, run, clock.now_ms()) == []  # type: ignore[arg-type]
    assert calls == []


def test_deleted_dependent_is_unlinked_and_skipped(engine: Engine, clock: ManualClock) -> None:
    store = engine.store
    up = cron_job(store, clock, "up")
    down = dependent(store, clock, "down", [up])
    lifecycle.delete_job(store, OWNER, down.id, clock.now_ms())
    assert store.dependents_of(up.id) == []
    _, released = finish(engine, clock, up)
    assert released == []


# -- validation --------------------------------------------------------------------------------


def test_upstreams_of_another_owner_or_missing_are_not_found_alike(engine: Engine, clock: ManualClock) -> None:
    store = engine.store
    foreign = cron_job(store, clock, "foreign", owner="someone-else")
    missing = "job_" + "0" * 32
    messages = []
    for upstream_id in (foreign.id, missing):
        spec = JobSpec.model_validate({"name": "d", "depends_on": {"jobs": [upstream_id]}, "target": HTTP.model_dump()})
        with pytest.raises(JobNotFound) as caught:
            service.create_job(store, OWNER, spec, clock.now_ms())
        messages.append(caught.value.message.replace(upstream_id, "<id>"))
    assert messages[0] == messages[1]
    assert store.dependents_of(foreign.id) == [] and not store.get_job(foreign.id).has_dependents


def test_cycles_are_refused_on_create_and_patch(engine: Engine, clock: ManualClock) -> None:
    store = engine.store
    a = cron_job(store, clock, "a")
    b = dependent(store, clock, "b", [a])
    c = dependent(store, clock, "c", [b])
    with pytest.raises(DependencyCycle):  # a -> c while c -> b -> a
        service.update_job(store, OWNER, a.id, {"schedule": None, "depends_on": {"jobs": [c.id]}}, clock.now_ms())
    with pytest.raises(DependencyCycle):
        service.update_job(store, OWNER, b.id, {"depends_on": {"jobs": [b.id]}}, clock.now_ms())
    assert store.get_job(a.id).depends_on is None and store.dependents_of(c.id) == []
    # a keyed create whose derived id names itself
    from punctual import ids

    self_id = ids.job_id_for_idempotency_key(OWNER, "self")
    spec = JobSpec.model_validate({"name": "s", "depends_on": {"jobs": [self_id]}, "target": HTTP.model_dump()})
    with pytest.raises(JobNotFound):  # it does not exist yet, so it cannot be named
        service.create_job(store, OWNER, spec, clock.now_ms(), idempotency_key="self")


def test_patch_moves_edges_and_switches_between_schedule_and_dependencies(engine: Engine, clock: ManualClock) -> None:
    store = engine.store
    a, b = cron_job(store, clock, "a"), cron_job(store, clock, "b")
    d = dependent(store, clock, "d", [a])
    moved = service.update_job(store, OWNER, d.id, {"depends_on": {"jobs": [b.id], "when": "failed"}}, clock.now_ms())
    assert moved.depends_on is not None and moved.depends_on.jobs == [b.id]
    assert store.dependents_of(a.id) == [] and store.dependents_of(b.id) == [d.id]
    cron = service.update_job(store, OWNER, d.id, {"depends_on": None, "schedule": "*/5 * * * *"}, clock.now_ms())
    assert cron.next_run_at is not None and store.dependents_of(b.id) == []
    back = service.update_job(store, OWNER, d.id, {"depends_on": {"jobs": [a.id]}, "schedule": None}, clock.now_ms())
    assert back.next_run_at is None and back.status is JobStatus.ACTIVE and store.dependents_of(a.id) == [d.id]


def test_deleting_a_job_with_dependents_needs_force(engine: Engine, clock: ManualClock) -> None:
    store = engine.store
    up = cron_job(store, clock, "up")
    down = dependent(store, clock, "down", [up])
    with pytest.raises(HasDependents):
        lifecycle.delete_job(store, OWNER, up.id, clock.now_ms())
    assert store.get_job(up.id).status is JobStatus.ACTIVE
    lifecycle.delete_job(store, OWNER, up.id, clock.now_ms(), force=True)
    assert store.get_job(down.id).status is JobStatus.ACTIVE  # valid, waiting


@pytest.mark.parametrize(
    "body",
    [
        {"depends_on": {"jobs": []}},
        {"depends_on": {"jobs": [f"job_{i:032x}" for i in range(11)]}},
        {"depends_on": {"jobs": ["job_" + "a" * 32, "job_" + "a" * 32]}},
        {"depends_on": {"jobs": ["nope"]}},
        {"depends_on": {"jobs": ["job_" + "a" * 32], "when": "sometimes"}},
        {"depends_on": {"jobs": ["job_" + "a" * 32]}, "schedule": "* * * * *"},
        {"depends_on": {"jobs": ["job_" + "a" * 32]}, "run_at": "2030-01-01T00:00:00Z"},
    ],
)
def test_bad_depends_on_is_refused_by_the_spec(body: dict[str, Any]) -> None:
    from pydantic import ValidationError

    with pytest.raises((ValidationError, InvalidInput)):
        JobSpec.model_validate({"name": "x", "target": HTTP.model_dump(), **body})
