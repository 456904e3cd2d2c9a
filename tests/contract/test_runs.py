"""Contract: runs are inserted once, read back, and listed (filters, cursor pagination)."""

from __future__ import annotations

import pytest

from punctual import ids
from punctual.clock import ManualClock
from punctual.errors import InvalidCursor, InvalidTransition, RunNotFound
from punctual.model import AttemptOutcome, Job, RunState, Trigger
from punctual.port import RunChange, RunQuery, Store
from tests.contract.factories import MINUTE, all_pages, attempt, make_job, make_run

pytestmark = pytest.mark.contract


@pytest.fixture
def job(store: Store, clock: ManualClock) -> Job:
    job = make_job("alice", clock, shards=store.shards)
    store.create_job(job)
    return job


def test_insert_then_get_returns_the_same_run(store: Store, clock: ManualClock, job: Job) -> None:
    now = clock.now_ms()
    run = make_run(job, now, clock, trigger=Trigger.CATCHUP, note="caught up")
    assert store.insert_runs([run]) == [True]
    assert store.get_run(job.id, now) == run


def test_a_run_in_any_state_round_trips(store: Store, clock: ManualClock, job: Job) -> None:
    now = clock.now_ms()
    done = make_run(
        job,
        now,
        clock,
        state=RunState.SUCCEEDED,
        attempt=2,
        started_at=now + 1,
        finished_at=now + 9,
        attempts=[
            attempt(1, "w1", now + 1, now + 5, AttemptOutcome.TIMEOUT, error="timed out"),
            attempt(2, "w2", now + 6, now + 9, status_code=200, response_excerpt='{"ok": true}'),
        ],
    )
    retrying = make_run(job, now + MINUTE, clock, state=RunState.RETRYING, attempt=1, next_attempt_at=now + 99)
    assert store.insert_runs([done, retrying]) == [True, True]
    assert store.get_run(job.id, now) == done
    assert store.get_run(job.id, now + MINUTE) == retrying


def test_same_job_and_time_is_inserted_once(store: Store, clock: ManualClock, job: Job) -> None:
    now = clock.now_ms()
    first = make_run(job, now, clock)
    assert store.insert_runs([first]) == [True]
    clock.advance(1_000)
    second = make_run(job, now, clock, state=RunState.CANCELLED, note="a second claimer", trigger=Trigger.MANUAL)
    assert store.insert_runs([second]) == [False]
    assert store.get_run(job.id, now) == first  # the stored row is untouched


def test_insert_batch_reports_each_run(store: Store, clock: ManualClock, job: Job) -> None:
    now = clock.now_ms()
    other = make_job("alice", clock, shards=store.shards)
    store.create_job(other)
    existing = make_run(job, now, clock)
    store.insert_runs([existing])
    batch = [
        make_run(job, now - MINUTE, clock),
        make_run(job, now, clock, note="dup"),
        make_run(other, now, clock),  # same time, another job: a different run
        make_run(job, now + MINUTE, clock),
    ]
    assert store.insert_runs(batch) == [True, False, True, True]
    assert store.get_run(job.id, now) == existing
    assert store.get_run(other.id, now) == batch[2]
    assert store.insert_runs([]) == []


def test_insert_many_runs(store: Store, clock: ManualClock, job: Job) -> None:
    now = clock.now_ms()
    runs = [make_run(job, now + i * MINUTE, clock) for i in range(30)]  # more than any batch size
    assert store.insert_runs(runs) == [True] * 30
    assert store.insert_runs(runs) == [False] * 30
    for run in runs[::7]:
        assert store.get_run(job.id, run.scheduled_at) == run


def test_get_missing_run(store: Store, clock: ManualClock, job: Job) -> None:
    with pytest.raises(RunNotFound):
        store.get_run(job.id, clock.now_ms())
    with pytest.raises(RunNotFound):
        store.get_run(ids.new_job_id(), clock.now_ms())


# -- list_runs ----------------------------------------------------------------------------------

STATES = [
    RunState.SUCCEEDED,
    RunState.FAILED,
    RunState.SCHEDULED,
    RunState.SUCCEEDED,
    RunState.DEAD,
    RunState.RETRYING,
    RunState.SUCCEEDED,
]


def _seven_runs(store: Store, clock: ManualClock, job: Job) -> list[int]:
    """Runs of ``job`` at T0 + i minutes (i = 0..6) in STATES; another job's runs alongside."""
    t0 = clock.now_ms()
    store.insert_runs([make_run(job, t0 + i * MINUTE, clock, state=state) for i, state in enumerate(STATES)])
    other = make_job("alice", clock, shards=store.shards)
    store.create_job(other)
    store.insert_runs([make_run(other, t0 + i * MINUTE, clock) for i in range(3)])
    return [t0 + i * MINUTE for i in range(7)]


def _listed(store: Store, job_id: str, **query: object) -> list[int]:
    return [
        r.scheduled_at
        for page in all_pages(lambda c: store.list_runs(job_id, RunQuery(cursor=c, **query)))
        for r in page
    ]


def test_list_runs_newest_first(store: Store, clock: ManualClock, job: Job) -> None:
    times = _seven_runs(store, clock, job)
    page = store.list_runs(job.id, RunQuery())
    assert [r.scheduled_at for r in page.items] == times[::-1]
    assert all(r.job_id == job.id for r in page.items)
    assert page.items[0] == store.get_run(job.id, times[-1])
    assert page.cursor is None


def test_list_runs_of_a_job_without_runs(store: Store, job: Job) -> None:
    assert store.list_runs(job.id, RunQuery()).items == []
    assert store.list_runs(ids.new_job_id(), RunQuery()).items == []


def test_list_runs_by_state(store: Store, clock: ManualClock, job: Job) -> None:
    times = _seven_runs(store, clock, job)
    succeeded = [t for t, s in zip(times, STATES, strict=True) if s is RunState.SUCCEEDED]
    assert _listed(store, job.id, states=frozenset({RunState.SUCCEEDED}), limit=2) == succeeded[::-1]
    finished_badly = [t for t, s in zip(times, STATES, strict=True) if s in {RunState.FAILED, RunState.DEAD}]
    assert _listed(store, job.id, states=frozenset({RunState.FAILED, RunState.DEAD})) == finished_badly[::-1]
    assert _listed(store, job.id, states=frozenset({RunState.CANCELLED})) == []


def test_list_runs_since_and_until_are_inclusive(store: Store, clock: ManualClock, job: Job) -> None:
    times = _seven_runs(store, clock, job)
    assert _listed(store, job.id, since=times[2]) == times[2:][::-1]
    assert _listed(store, job.id, until=times[4]) == times[:5][::-1]
    assert _listed(store, job.id, since=times[2], until=times[4]) == times[2:5][::-1]
    assert _listed(store, job.id, since=times[2] + 1, until=times[4] - 1) == [times[3]]
    assert _listed(store, job.id, since=times[5], until=times[1]) == []
    assert _listed(store, job.id, since=times[1], until=times[5], states=frozenset({RunState.SUCCEEDED}), limit=1) == [
        times[3]
    ]


def test_list_runs_cursor_pagination_returns_each_run_once(store: Store, clock: ManualClock, job: Job) -> None:
    times = _seven_runs(store, clock, job)
    pages = list(all_pages(lambda c: store.list_runs(job.id, RunQuery(limit=3, cursor=c))))
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [r.scheduled_at for p in pages for r in p] == times[::-1]


def test_list_runs_pagination_keeps_the_filters(store: Store, clock: ManualClock, job: Job) -> None:
    times = _seven_runs(store, clock, job)
    assert _listed(store, job.id, since=times[1], limit=2) == times[1:][::-1]


@pytest.mark.parametrize("cursor", ["garbage", "A" * 40, "eyJrIjoicnVucyJ9"])
def test_list_runs_refuses_a_garbage_cursor(store: Store, clock: ManualClock, job: Job, cursor: str) -> None:
    _seven_runs(store, clock, job)
    with pytest.raises(InvalidCursor):
        store.list_runs(job.id, RunQuery(limit=2, cursor=cursor))


def test_list_runs_refuses_a_cursor_of_another_listing(store: Store, clock: ManualClock, job: Job) -> None:
    _seven_runs(store, clock, job)
    for _ in range(2):
        store.create_job(make_job("alice", clock, shards=store.shards))
    jobs_cursor = store.list_jobs("alice", limit=1).cursor
    assert jobs_cursor is not None
    with pytest.raises(InvalidCursor):
        store.list_runs(job.id, RunQuery(limit=2, cursor=jobs_cursor))


def test_the_same_run_twice_in_one_batch_is_inserted_once(store: Store, clock: ManualClock, job: Job) -> None:
    now = clock.now_ms()
    first, twin = make_run(job, now, clock), make_run(job, now, clock, note="twin")
    other = make_run(job, now + MINUTE, clock)
    assert store.insert_runs([first, other, twin]) == [True, True, False]
    assert store.get_run(job.id, now) == first


def test_list_runs_refuses_a_cursor_of_another_job(store: Store, clock: ManualClock, job: Job) -> None:
    _seven_runs(store, clock, job)
    other = make_job("alice", clock, shards=store.shards)
    store.create_job(other)
    store.insert_runs([make_run(other, clock.now_ms() + i * MINUTE, clock) for i in range(7)])
    others_cursor = store.list_runs(other.id, RunQuery(limit=2)).cursor
    assert others_cursor is not None
    with pytest.raises(InvalidCursor):
        store.list_runs(job.id, RunQuery(limit=2, cursor=others_cursor))


def test_a_transition_the_lifecycle_forbids_is_refused_and_changes_nothing(
    store: Store, clock: ManualClock, job: Job
) -> None:
    # Given a finished run
    now = clock.now_ms()
    done = make_run(job, now, clock, state=RunState.SUCCEEDED, attempt=1, started_at=now, finished_at=now + 5)
    store.insert_runs([done])
    # When something tries to reopen it, Then both engines refuse (RUN_TRANSITIONS) and the row stays
    with pytest.raises(InvalidTransition):
        store.transition_run(done, RunChange(RunState.RETRYING, now + 10, now + 10, next_attempt_at=now + 10))
    assert store.get_run(job.id, now) == done
