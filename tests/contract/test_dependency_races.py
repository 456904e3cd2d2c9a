"""Concurrent edits of the dependency graph on both engines (issue 26, case 5): the graph check and
the write that it allowed are one decision, so two requests can never combine into a cycle or a
dependent that names a deleted upstream.

Each test forces the interleaving that used to break it: request A runs through an
:class:`Interleaved` store, which starts request B (in another thread, on the plain store) right
before A's first write, i.e. after A's check. A waits for B to finish before it writes:

- aws: B runs to its end between A's check and A's transaction, which then fails its conditions;
  A decides again on fresh reads (and is refused, or succeeds where B's change does not matter);
- embedded: A's check and write hold SQLite's write lock, so B cannot start before A commits; the
  wait ends after ``WAIT_S[embedded]`` without B, and B then decides on A's result.

Each test asserts which of the two happened (``b_first``), so a hook that stops firing where it should
cannot pass unnoticed, and checks the final graph with :func:`assert_consistent`. Against the code
before decisions (check, then link, then write as separate calls; 2026-12-01) every test but the last
two stored a cycle, a dependent naming a deleted upstream, or a reverse edge to a deleted job, on
both engines. The last two guard against false conflicts; there they failed only on the embedded
engine's ``b_first`` (nothing kept B out of A's check and write).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from punctual.clock import ManualClock
from punctual.errors import DependencyCycle, HasDependents, InvalidTransition, JobNotFound, PunctualError
from punctual.jobs import lifecycle, service
from punctual.model import Job, JobSpec, JobStatus
from punctual.port import Store
from tests.contract.factories import HTTP

pytestmark = pytest.mark.contract

OWNER = "owner-races"
# How long A waits for B before writing: B is blocked by A's lock on the embedded engine (the whole
# wait is spent), and finishes in well under a second on aws (the wait ends when it does).
WAIT_S = {"embedded": 0.5, "aws": 30.0}
JOIN_S = 60.0


@dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None
    done: bool = False


class Interleaved:
    """Request A's store: right before A's first write, request B runs in another thread.

    The first write is the first call of a writing method, or, for a decision taken through
    :meth:`Store.decide_edges`, the moment A's decision is made (its reads done, its write not).
    """

    WRITES = frozenset({"create_job", "update_job", "link_dependent", "unlink_dependent"})

    def __init__(self, store: Store, request_b: Callable[[], Any], wait_s: float) -> None:
        self._store = store
        self._request_b = request_b
        self._wait_s = wait_s
        self._fired = False
        self.b = Outcome()
        self.b_first = False  # B finished before A went on to write
        self._thread: threading.Thread | None = None

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name not in self.WRITES:
            return attr

        def write(*args: Any, **kwargs: Any) -> Any:
            self._before_write()
            return attr(*args, **kwargs)

        return write

    def decide_edges(self, owner: str, decide: Callable[[Any], Any]) -> Any:
        def decided(reads: Any) -> Any:
            change = decide(reads)
            self._before_write()
            return change

        return self._store.decide_edges(owner, decided)

    def _before_write(self) -> None:
        if self._fired:
            return
        self._fired = True
        done = threading.Event()

        def run_b() -> None:
            try:
                self.b.value = self._request_b()
            except BaseException as exc:  # recorded for the test to assert on
                self.b.error = exc
            finally:
                self.b.done = True
                done.set()

        self._thread = threading.Thread(target=run_b, daemon=True)
        self._thread.start()
        self.b_first = done.wait(self._wait_s)

    def join(self) -> Outcome:
        assert self._fired, "request A never reached a write"
        assert self._thread is not None
        self._thread.join(JOIN_S)
        assert self.b.done, "request B did not finish"
        return self.b


@dataclass
class Race:
    a: Outcome
    b: Outcome
    b_first: bool  # B ran to its end between A's check and A's write

    @property
    def first(self) -> Outcome:
        """The request whose write committed first: B if it ran in between, else A."""
        return self.b if self.b_first else self.a

    @property
    def second(self) -> Outcome:
        return self.a if self.b_first else self.b


def race(store: Store, request_a: Callable[[Store], Any], request_b: Callable[[Store], Any], engine_kind: str) -> Race:
    """Run A through an :class:`Interleaved` store that starts B right before A's write."""
    interleaved = Interleaved(store, lambda: request_b(store), WAIT_S[engine_kind])
    a = Outcome()
    try:
        a.value = request_a(interleaved)  # type: ignore[arg-type]
    except PunctualError as exc:
        a.error = exc
    a.done = True
    return Race(a, interleaved.join(), interleaved.b_first)


def assert_interleaved(race: Race, engine_kind: str) -> None:
    """On aws B ran between A's check and A's write; on the embedded engine A's lock kept it out."""
    assert race.b_first == (engine_kind == "aws"), "B did not run where it should have"


# -- the graph after the race --------------------------------------------------------------------


def assert_consistent(store: Store, job_ids: list[str]) -> dict[str, Job]:
    """The graph among ``job_ids`` is acyclic; every live dependent names only live upstreams (no
    test here deletes with force); the reverse edges are exactly the live dependents' upstreams;
    every upstream with a live dependent is marked ``has_dependents``."""
    jobs = store.get_jobs(job_ids)
    live = {job_id: job for job_id, job in jobs.items() if job.status is not JobStatus.DELETED}
    upstreams = {job_id: list(job.depends_on.jobs) if job.depends_on else [] for job_id, job in jobs.items()}
    _assert_acyclic(upstreams)
    for job in live.values():
        for upstream_id in upstreams[job.id]:
            assert upstream_id in live, f"{job.id} depends on {upstream_id}, which is deleted or absent"
    for job_id in job_ids:
        expected = sorted(d for d in live if job_id in upstreams[d])
        assert store.dependents_of(job_id) == expected, f"reverse edges of {job_id}"
        if expected:
            assert jobs[job_id].has_dependents, f"{job_id} has dependents but is not marked"
    return jobs


def _assert_acyclic(upstreams: dict[str, list[str]]) -> None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(job_id: str, path: list[str]) -> None:
        if state.get(job_id) == 2:
            return
        assert state.get(job_id) != 1, f"dependency cycle: {' -> '.join([*path, job_id])}"
        state[job_id] = 1
        for upstream_id in upstreams.get(job_id, []):
            visit(upstream_id, [*path, job_id])
        state[job_id] = 2

    for job_id in upstreams:
        visit(job_id, [])


# -- helpers ---------------------------------------------------------------------------------------


def cron(store: Store, clock: ManualClock, name: str) -> Job:
    spec = JobSpec(name=name, schedule="0 0 * * *", target=HTTP)
    return service.create_job(store, OWNER, spec, clock.now_ms()).job


def after_spec(name: str, upstream_ids: list[str]) -> JobSpec:
    return JobSpec.model_validate({"name": name, "depends_on": {"jobs": upstream_ids}, "target": HTTP.model_dump()})


def depend(store: Store, clock: ManualClock, job_id: str, upstream_ids: list[str]) -> Job:
    changes = {"schedule": None, "depends_on": {"jobs": upstream_ids}}
    return service.update_job(store, OWNER, job_id, changes, clock.now_ms())


def refused(outcome: Outcome, *errors: type[BaseException]) -> bool:
    return outcome.error is not None and isinstance(outcome.error, errors)


# -- cycles ----------------------------------------------------------------------------------------


def test_two_patches_that_close_a_cycle_store_only_one(store: Store, clock: ManualClock, engine_kind: str) -> None:
    a, b = cron(store, clock, "a"), cron(store, clock, "b")
    r = race(
        store,
        lambda s: depend(s, clock, a.id, [b.id]),  # a -> b ...
        lambda s: depend(s, clock, b.id, [a.id]),  # ... while b -> a
        engine_kind,
    )
    jobs = assert_consistent(store, [a.id, b.id])
    assert sum(job.depends_on is not None for job in jobs.values()) == 1
    assert r.first.error is None and isinstance(r.second.error, DependencyCycle)  # decided again, then refused
    assert_interleaved(r, engine_kind)


def test_two_patches_that_close_a_longer_cycle_store_only_one(
    store: Store, clock: ManualClock, engine_kind: str
) -> None:
    a, c = cron(store, clock, "a"), cron(store, clock, "c")
    b = service.create_job(store, OWNER, after_spec("b", [a.id]), clock.now_ms()).job  # b -> a
    r = race(
        store,
        lambda s: depend(s, clock, a.id, [c.id]),  # a -> c: its check reads c (no upstreams yet)
        lambda s: depend(s, clock, c.id, [b.id]),  # c -> b: its check reads b and a (none yet)
        engine_kind,
    )
    assert_consistent(store, [a.id, b.id, c.id])
    assert r.first.error is None and isinstance(r.second.error, DependencyCycle)
    assert_interleaved(r, engine_kind)


def test_a_cycle_through_a_graph_larger_than_one_transaction_is_refused(
    store: Store, clock: ManualClock, engine_kind: str
) -> None:
    # top -> 10 mids -> 90 roots (9 each): adding top's upstreams reads 100 jobs, more than the
    # conditions one DynamoDB transaction can carry, so the aws engine decides on the owner's graph
    # sequence instead (engines/aws/edges.py). A racing edge root -> top must still be caught.
    roots = [cron(store, clock, f"root-{i}") for i in range(90)]
    groups = [[r.id for r in roots[i * 9 : i * 9 + 9]] for i in range(10)]
    mids = [
        service.create_job(store, OWNER, after_spec(f"mid-{i}", g), clock.now_ms()).job for i, g in enumerate(groups)
    ]
    top = cron(store, clock, "top")
    r = race(
        store,
        lambda s: depend(s, clock, top.id, [m.id for m in mids]),
        lambda s: depend(s, clock, roots[0].id, [top.id]),
        engine_kind,
    )
    assert_consistent(store, [top.id, *(m.id for m in mids), *(r.id for r in roots)])
    assert r.first.error is None and isinstance(r.second.error, DependencyCycle)
    assert_interleaved(r, engine_kind)


# -- deleting an upstream --------------------------------------------------------------------------


@pytest.mark.parametrize("first", ["create", "delete"])
def test_a_delete_of_an_upstream_and_a_create_naming_it_leave_no_dangling_dependent(
    store: Store, clock: ManualClock, engine_kind: str, first: str
) -> None:
    up = cron(store, clock, "up")
    created: list[str] = []

    def create(s: Store) -> Job:
        job = service.create_job(s, OWNER, after_spec("down", [up.id]), clock.now_ms()).job
        created.append(job.id)
        return job

    def delete(s: Store) -> Job:
        return lifecycle.delete_job(s, OWNER, up.id, clock.now_ms())

    r = race(store, create, delete, engine_kind) if first == "create" else race(store, delete, create, engine_kind)
    assert_consistent(store, [up.id, *created])
    # the first to commit wins: the dependent exists and its upstream stays, or the upstream is
    # deleted and the create finds no upstream to name
    creation, deletion = (r.a, r.b) if first == "create" else (r.b, r.a)
    if r.first is deletion:
        assert deletion.error is None and isinstance(creation.error, JobNotFound) and not created
        assert store.get_job(up.id).status is JobStatus.DELETED
    else:
        assert creation.error is None and isinstance(deletion.error, HasDependents)
        assert store.get_job(up.id).status is JobStatus.ACTIVE
    assert_interleaved(r, engine_kind)


def test_a_patch_naming_an_upstream_races_its_delete(store: Store, clock: ManualClock, engine_kind: str) -> None:
    up, other = cron(store, clock, "up"), cron(store, clock, "other")
    down = service.create_job(store, OWNER, after_spec("down", [other.id]), clock.now_ms()).job
    r = race(
        store,
        lambda s: depend(s, clock, down.id, [other.id, up.id]),
        lambda s: lifecycle.delete_job(s, OWNER, up.id, clock.now_ms()),
        engine_kind,
    )
    assert_consistent(store, [up.id, other.id, down.id])
    assert r.first.error is None
    assert isinstance(r.second.error, JobNotFound if r.b_first else HasDependents)
    assert_interleaved(r, engine_kind)


# -- a dependent deleted while its upstreams change ------------------------------------------------


def test_a_patch_of_depends_on_races_the_delete_of_the_job_itself(
    store: Store, clock: ManualClock, engine_kind: str
) -> None:
    up, new = cron(store, clock, "up"), cron(store, clock, "new")
    down = service.create_job(store, OWNER, after_spec("down", [up.id]), clock.now_ms()).job
    r = race(
        store,
        lambda s: depend(s, clock, down.id, [new.id]),
        lambda s: lifecycle.delete_job(s, OWNER, down.id, clock.now_ms()),
        engine_kind,
    )
    assert r.b.error is None  # the delete lands, before or after the PATCH
    assert r.a.error is None if not r.b_first else isinstance(r.a.error, InvalidTransition)
    assert store.get_job(down.id).status is JobStatus.DELETED
    assert_consistent(store, [up.id, new.id, down.id])  # no reverse edge to the deleted job is left
    assert_interleaved(r, engine_kind)


# -- no false conflicts -------------------------------------------------------------------------------


def test_two_dependents_of_one_upstream_created_at_once_both_succeed(
    store: Store, clock: ManualClock, engine_kind: str
) -> None:
    up = cron(store, clock, "up")
    r = race(
        store,
        lambda s: service.create_job(s, OWNER, after_spec("d1", [up.id]), clock.now_ms()).job,
        lambda s: service.create_job(s, OWNER, after_spec("d2", [up.id]), clock.now_ms()).job,
        engine_kind,
    )
    assert r.a.error is None and r.b.error is None
    assert_consistent(store, [up.id, r.a.value.id, r.b.value.id])
    assert_interleaved(r, engine_kind)


def test_an_unrelated_patch_of_the_upstream_does_not_refuse_a_new_dependent(
    store: Store, clock: ManualClock, engine_kind: str
) -> None:
    up = cron(store, clock, "up")
    r = race(
        store,
        lambda s: service.create_job(s, OWNER, after_spec("d", [up.id]), clock.now_ms()).job,
        lambda s: service.update_job(s, OWNER, up.id, {"name": "renamed"}, clock.now_ms()),
        engine_kind,
    )
    assert r.a.error is None and r.b.error is None
    assert store.get_job(up.id).name == "renamed"
    assert_consistent(store, [up.id, r.a.value.id])
    assert_interleaved(r, engine_kind)
