"""Contract: jobs (create, get, list, update) on every engine."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from punctual import ids
from punctual.clock import ManualClock
from punctual.errors import ConcurrentModification, InvalidCursor, JobAlreadyExists, JobNotFound
from punctual.model import (
    Catchup,
    Job,
    JobStatus,
    LambdaTarget,
    Overlap,
    RetryPolicy,
    RunState,
)
from punctual.port import Advance, RunQuery, Store
from tests.contract.factories import all_pages, make_job, make_run

pytestmark = pytest.mark.contract


def test_create_then_get_returns_the_same_job(store: Store, clock: ManualClock) -> None:
    job = make_job(
        "alice",
        clock,
        shards=store.shards,
        schedule="*/5 9-17 * * MON-FRI",
        timezone="Europe/Berlin",
        payload={"a": [1, 2.5, "x", None, True, -3], "b": {"c": "ünï", "big": 2**53}, "f": 0.1},
        target=LambdaTarget(function_arn="arn:aws:lambda:eu-west-1:123456789012:function:f"),
        timeout_s=300,
        max_retries=7,
        retry=RetryPolicy(backoff_s=3, max_backoff_s=99),
        jitter_s=12,
        overlap=Overlap.FORBID,
        catchup=Catchup.BACKFILL,
        max_backfill=4,
        last_run_at=clock.now_ms() - 300_000,
    )
    store.create_job(job)
    assert store.get_job(job.id) == job


def test_one_time_job_round_trips(store: Store, clock: ManualClock) -> None:
    run_at = datetime(2027, 1, 15, 9, 30, tzinfo=timezone(timedelta(hours=1)))
    job = make_job(
        "alice",
        clock,
        shards=store.shards,
        run_at=run_at,
        next_run_at=clock.now_ms() + 1_800_000,
        payload="just a string",
    )
    store.create_job(job)
    got = store.get_job(job.id)
    assert got == job
    assert got.schedule is None
    assert got.run_at == run_at  # the same instant (the offset may be normalized)


@pytest.mark.parametrize("status", [JobStatus.PAUSED, JobStatus.COMPLETED, JobStatus.DELETED])
def test_inactive_jobs_round_trip(store: Store, clock: ManualClock, status: JobStatus) -> None:
    job = make_job("alice", clock, shards=store.shards, status=status, payload=None)
    store.create_job(job)
    assert store.get_job(job.id) == job


def test_create_twice_is_refused_and_changes_nothing(store: Store, clock: ManualClock) -> None:
    job = make_job("alice", clock, shards=store.shards)
    store.create_job(job)
    impostor = make_job("mallory", clock, shards=store.shards, name="impostor").model_copy(
        update={"id": job.id, "due_shard": job.due_shard}
    )
    with pytest.raises(JobAlreadyExists):
        store.create_job(impostor)
    assert store.get_job(job.id) == job


def test_get_missing_job(store: Store) -> None:
    with pytest.raises(JobNotFound):
        store.get_job(ids.new_job_id())


# -- list_jobs ------------------------------------------------------------------------------------


def _create_jobs(store: Store, clock: ManualClock, owner: str, n: int, **fields: object) -> list[Job]:
    """n jobs with distinct created_at (in creation order)."""
    made = []
    for _ in range(n):
        clock.advance(1_000)
        job = make_job(owner, clock, shards=store.shards, **fields)
        store.create_job(job)
        made.append(job)
    return made


def test_list_jobs_is_per_owner_and_newest_first(store: Store, clock: ManualClock) -> None:
    alice = _create_jobs(store, clock, "alice", 3)
    bob = _create_jobs(store, clock, "bob", 2)
    _create_jobs(store, clock, "alice2", 1)  # an owner whose name extends another's

    page = store.list_jobs("alice")
    assert page.items == list(reversed(alice))
    assert page.cursor is None
    assert store.list_jobs("bob").items == list(reversed(bob))
    assert store.list_jobs("nobody").items == []


def test_list_jobs_filters_by_status_and_hides_deleted(store: Store, clock: ManualClock) -> None:
    active = _create_jobs(store, clock, "alice", 2)
    paused = _create_jobs(store, clock, "alice", 2, status=JobStatus.PAUSED)
    completed = _create_jobs(store, clock, "alice", 1, status=JobStatus.COMPLETED)
    deleted = _create_jobs(store, clock, "alice", 2, status=JobStatus.DELETED)

    def ids_of(status: JobStatus | None) -> list[str]:
        return [
            j.id
            for items in all_pages(lambda c: store.list_jobs("alice", status=status, limit=2, cursor=c))
            for j in items
        ]

    newest_first = [j.id for j in reversed(active + paused + completed)]
    assert ids_of(None) == newest_first  # everything but deleted
    assert ids_of(JobStatus.ACTIVE) == [j.id for j in reversed(active)]
    assert ids_of(JobStatus.PAUSED) == [j.id for j in reversed(paused)]
    assert ids_of(JobStatus.COMPLETED) == [j.id for j in reversed(completed)]
    assert ids_of(JobStatus.DELETED) == [j.id for j in reversed(deleted)]


def test_deleting_a_job_hides_it_from_the_listing(store: Store, clock: ManualClock) -> None:
    [a, b] = _create_jobs(store, clock, "alice", 2)
    store.update_job(a.model_copy(update={"status": JobStatus.DELETED, "next_run_at": None}), a.version)
    assert [j.id for j in store.list_jobs("alice").items] == [b.id]
    assert [j.id for j in store.list_jobs("alice", status=JobStatus.DELETED).items] == [a.id]


def test_list_jobs_cursor_pagination_returns_each_job_once(store: Store, clock: ManualClock) -> None:
    jobs = _create_jobs(store, clock, "alice", 7)
    _create_jobs(store, clock, "bob", 3)
    pages = list(all_pages(lambda c: store.list_jobs("alice", limit=3, cursor=c)))
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [j.id for p in pages for j in p] == [j.id for j in reversed(jobs)]


def test_list_jobs_pagination_with_an_exact_multiple_of_the_limit(store: Store, clock: ManualClock) -> None:
    jobs = _create_jobs(store, clock, "alice", 6)
    pages = list(all_pages(lambda c: store.list_jobs("alice", limit=3, cursor=c)))
    assert [j.id for p in pages for j in p] == [j.id for j in reversed(jobs)]
    assert all(pages[:2]) and len(pages) <= 3  # at most one empty trailing page


def test_list_jobs_pagination_with_equal_created_at(store: Store, clock: ManualClock) -> None:
    # jobs created in the same millisecond are still each listed exactly once
    jobs = [make_job("alice", clock, shards=store.shards) for _ in range(5)]
    for job in jobs:
        store.create_job(job)
    listed = [j.id for p in all_pages(lambda c: store.list_jobs("alice", limit=2, cursor=c)) for j in p]
    assert sorted(listed) == sorted(j.id for j in jobs)


@pytest.mark.parametrize("cursor", ["garbage", "eyJrIjoiam9icyJ9", "A" * 40])
def test_list_jobs_refuses_a_garbage_cursor(store: Store, clock: ManualClock, cursor: str) -> None:
    _create_jobs(store, clock, "alice", 2)
    with pytest.raises(InvalidCursor):
        store.list_jobs("alice", limit=1, cursor=cursor)


def test_list_jobs_refuses_a_cursor_of_another_listing(store: Store, clock: ManualClock) -> None:
    [job] = _create_jobs(store, clock, "alice", 1)
    store.insert_runs([make_run(job, clock.now_ms() + i, clock) for i in range(3)])
    runs_cursor = store.list_runs(job.id, RunQuery(limit=1)).cursor
    assert runs_cursor is not None
    with pytest.raises(InvalidCursor):
        store.list_jobs("alice", limit=1, cursor=runs_cursor)


def test_list_jobs_refuses_a_tampered_cursor(store: Store, clock: ManualClock) -> None:
    _create_jobs(store, clock, "alice", 3)
    cursor = store.list_jobs("alice", limit=1).cursor
    assert cursor is not None
    tampered = cursor[:5] + ("A" if cursor[5] != "A" else "B") + cursor[6:]
    with pytest.raises(InvalidCursor):
        store.list_jobs("alice", limit=1, cursor=tampered)


# -- update_job -----------------------------------------------------------------------------------


def test_update_with_the_right_version_bumps_it(store: Store, clock: ManualClock) -> None:
    job = make_job("alice", clock, shards=store.shards)
    store.create_job(job)
    clock.advance(5_000)
    edited = job.model_copy(update={"name": "renamed", "payload": {"v": 2}, "updated_at": clock.now_ms()})

    stored = store.update_job(edited, expected_version=job.version)

    assert stored.version == job.version + 1
    assert stored.name == "renamed" and stored.payload == {"v": 2}
    assert stored.updated_at == clock.now_ms()
    assert stored.created_at == job.created_at
    assert store.get_job(job.id) == stored
    assert stored == edited.model_copy(update={"version": job.version + 1})

    again = store.update_job(stored.model_copy(update={"name": "twice"}), expected_version=stored.version)
    assert again.version == job.version + 2


def test_update_with_a_stale_version_is_refused_and_changes_nothing(store: Store, clock: ManualClock) -> None:
    job = make_job("alice", clock, shards=store.shards)
    store.create_job(job)
    first = store.update_job(job.model_copy(update={"name": "first"}), expected_version=job.version)

    with pytest.raises(ConcurrentModification):
        store.update_job(job.model_copy(update={"name": "second"}), expected_version=job.version)
    with pytest.raises(ConcurrentModification):
        store.update_job(job.model_copy(update={"name": "future"}), expected_version=job.version + 5)
    assert store.get_job(job.id) == first


def test_update_of_a_missing_job(store: Store, clock: ManualClock) -> None:
    job = make_job("alice", clock, shards=store.shards)
    with pytest.raises(JobNotFound):
        store.update_job(job, expected_version=job.version)
    with pytest.raises(JobNotFound):
        store.get_job(job.id)  # and it did not create it


def test_update_keeps_runs(store: Store, clock: ManualClock) -> None:
    job = make_job("alice", clock, shards=store.shards)
    store.create_job(job)
    run = make_run(job, clock.now_ms(), clock, state=RunState.SCHEDULED)
    store.insert_runs([run])
    store.update_job(job.model_copy(update={"status": JobStatus.DELETED, "next_run_at": None}), job.version)
    assert store.get_run(job.id, run.scheduled_at) == run


def test_run_at_normalization_does_not_matter(store: Store, clock: ManualClock) -> None:
    at = datetime(2027, 3, 1, 12, 0, tzinfo=UTC)
    job = make_job("alice", clock, shards=store.shards, run_at=at)
    store.create_job(job)
    assert store.get_job(job.id).run_at == at


def test_list_jobs_refuses_a_cursor_of_another_owner(store: Store, clock: ManualClock) -> None:
    # a cursor belongs to the listing that made it: another owner's cursor is another listing
    _create_jobs(store, clock, "alice", 3)
    _create_jobs(store, clock, "bob", 3)
    bobs_cursor = store.list_jobs("bob", limit=1).cursor
    assert bobs_cursor is not None
    with pytest.raises(InvalidCursor):
        store.list_jobs("alice", limit=1, cursor=bobs_cursor)


def test_a_claim_invalidates_an_earlier_read_of_the_job(store: Store, clock: ManualClock) -> None:
    # the user reads the job, the scheduler claims it, the user saves the edit made on the old
    # read: the save must not silently move next_run_at/last_run_at back (one more run, lost history)
    now = clock.now_ms()
    job = make_job("alice", clock, shards=store.shards, next_run_at=now)
    store.create_job(job)
    read = store.get_job(job.id)
    assert store.advance_jobs([Advance(job.id, now, now + 60_000, now, now)]) == [True]
    with pytest.raises(ConcurrentModification):
        store.update_job(read.model_copy(update={"name": "edited"}), read.version)
    assert store.get_job(job.id).next_run_at == now + 60_000
