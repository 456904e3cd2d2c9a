"""Contract: the due index (due_jobs) and claiming a due job once (advance_jobs)."""

from __future__ import annotations

import pytest

from punctual.clock import ManualClock
from punctual.model import Catchup, Job, JobStatus, Overlap
from punctual.port import Advance, DueJob, Store
from tests.contract.factories import MINUTE, SECOND, due_view, make_job

pytestmark = pytest.mark.contract

FAR = 10**15  # an `until` past every test time


def _create(store: Store, clock: ManualClock, **fields: object) -> Job:
    job = make_job("alice", clock, shards=store.shards, **fields)
    store.create_job(job)
    return job


def _due_ids(store: Store, shard: int, until: int = FAR, limit: int = 1_000) -> list[str]:
    return [d.job_id for d in store.due_jobs(shard, until, limit)]


def test_due_job_carries_the_claim_projection(store: Store, clock: ManualClock) -> None:
    job = _create(
        store,
        clock,
        shard=1,
        schedule="*/5 * * * *",
        timezone="America/New_York",
        jitter_s=9,
        overlap=Overlap.REPLACE,
        catchup=Catchup.BACKFILL,
        max_backfill=3,
        last_run_at=clock.now_ms() - 5 * MINUTE,
        payload={"big": "x" * 2000},
    )
    assert store.due_jobs(1, FAR, 10) == [due_view(job, store)]


def test_one_time_job_is_due(store: Store, clock: ManualClock) -> None:
    from datetime import UTC, datetime

    job = _create(store, clock, shard=2, run_at=datetime(2027, 1, 15, 8, 0, tzinfo=UTC))
    [due] = store.due_jobs(2, clock.now_ms(), 10)
    assert due == due_view(job, store)
    assert due.schedule is None


def test_active_job_is_due_iff_next_run_at_is_at_or_before_until(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    early = _create(store, clock, shard=0, next_run_at=now - 5 * SECOND)
    on_time = _create(store, clock, shard=0, next_run_at=now)
    later = _create(store, clock, shard=0, next_run_at=now + 5 * SECOND)

    assert _due_ids(store, 0, now - 5 * SECOND - 1) == []
    assert _due_ids(store, 0, now - 5 * SECOND) == [early.id]
    assert _due_ids(store, 0, now) == [early.id, on_time.id]
    assert _due_ids(store, 0, now + 5 * SECOND - 1) == [early.id, on_time.id]
    assert _due_ids(store, 0, now + 5 * SECOND) == [early.id, on_time.id, later.id]


def test_due_jobs_are_ordered_by_next_run_at_and_limited(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    offsets = [7, 3, 9, 1, 5, 8, 2]  # created out of order
    jobs = {off: _create(store, clock, shard=3, next_run_at=now + off * SECOND) for off in offsets}
    due = store.due_jobs(3, FAR, 100)
    assert [d.job_id for d in due] == [jobs[off].id for off in sorted(offsets)]
    assert [d.job_id for d in store.due_jobs(3, FAR, 3)] == [jobs[off].id for off in [1, 2, 3]]


def test_after_continues_the_listing(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    # ties on next_run_at: the keyset is (next_run_at, job_id), so no tie is skipped or repeated
    jobs = [_create(store, clock, shard=0, next_run_at=now + (i // 3) * SECOND) for i in range(8)]
    seen: list[DueJob] = []
    after: DueJob | None = None
    for _ in range(10):
        page = store.due_jobs(0, FAR, 3, after=after)
        if not page:
            break
        assert len(page) <= 3
        seen += page
        after = page[-1]
    assert sorted(d.job_id for d in seen) == sorted(j.id for j in jobs)  # each exactly once
    assert [d.next_run_at for d in seen] == sorted(d.next_run_at for d in seen)


def test_after_respects_until(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    jobs = [_create(store, clock, shard=0, next_run_at=now + i * SECOND) for i in range(5)]
    [first] = store.due_jobs(0, now + 2 * SECOND, 1)
    rest = store.due_jobs(0, now + 2 * SECOND, 10, after=first)
    assert [first.job_id, *(d.job_id for d in rest)] == [j.id for j in jobs[:3]]


def test_shards_are_disjoint(store: Store, clock: ManualClock) -> None:
    by_shard = {shard: {_create(store, clock, shard=shard).id for _ in range(2)} for shard in range(store.shards)}
    for shard in range(store.shards):
        assert set(_due_ids(store, shard)) == by_shard[shard]


def test_inactive_jobs_are_never_due(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    _create(store, clock, shard=0, status=JobStatus.PAUSED)
    _create(store, clock, shard=0, status=JobStatus.COMPLETED)
    _create(store, clock, shard=0, status=JobStatus.DELETED)
    # even if a stale next_run_at were kept on an inactive job, it is not in the due index
    _create(store, clock, shard=0, status=JobStatus.PAUSED, next_run_at=now)
    _create(store, clock, shard=0, status=JobStatus.DELETED, next_run_at=now)
    assert _due_ids(store, 0) == []


def test_pause_removes_and_resume_restores(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    job = _create(store, clock, shard=1, next_run_at=now)
    other = _create(store, clock, shard=1, next_run_at=now + SECOND)

    paused = store.update_job(job.model_copy(update={"status": JobStatus.PAUSED, "next_run_at": None}), job.version)
    assert _due_ids(store, 1) == [other.id]

    resumed = store.update_job(
        paused.model_copy(update={"status": JobStatus.ACTIVE, "next_run_at": now + 2 * SECOND}), paused.version
    )
    assert _due_ids(store, 1) == [other.id, job.id]
    assert store.due_jobs(1, FAR, 10)[1] == due_view(resumed, store)


def test_delete_removes_from_the_due_index(store: Store, clock: ManualClock) -> None:
    job = _create(store, clock, shard=2)
    store.update_job(job.model_copy(update={"status": JobStatus.DELETED, "next_run_at": None}), job.version)
    assert _due_ids(store, 2) == []


def test_an_edit_moves_the_due_entry(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    job = _create(store, clock, shard=2, next_run_at=now + MINUTE)
    edited = store.update_job(
        job.model_copy(update={"schedule": "*/2 * * * *", "jitter_s": 4, "next_run_at": now + 2 * MINUTE}),
        job.version,
    )
    assert store.due_jobs(2, FAR, 10) == [due_view(edited, store)]
    assert _due_ids(store, 2, now + MINUTE) == []


# -- advance_jobs: a due job is claimed once ------------------------------------------------------


def test_advance_with_the_expected_time_applies_once(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    job = _create(store, clock, shard=0, next_run_at=now)
    advance = Advance(job.id, expected_next_run_at=now, next_run_at=now + MINUTE, last_run_at=now, now=now)

    assert store.advance_jobs([advance]) == [True]
    assert store.advance_jobs([advance]) == [False]  # a second claimer with the same stale read loses

    stored = store.get_job(job.id)
    assert stored.next_run_at == now + MINUTE
    assert stored.last_run_at == now
    assert stored.status is JobStatus.ACTIVE
    assert store.due_jobs(0, now, 10) == []
    assert store.due_jobs(0, FAR, 10) == [due_view(stored, store)]


def test_advance_with_a_stale_expected_time_is_refused(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    job = _create(store, clock, shard=0, next_run_at=now)
    assert store.advance_jobs([Advance(job.id, now - MINUTE, now + MINUTE, now - MINUTE, now)]) == [False]
    assert store.get_job(job.id) == job


def test_advance_of_a_paused_job_is_refused(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    job = _create(store, clock, shard=0, next_run_at=now)
    # the scheduler read the job as due, then the user paused it (keeping next_run_at would not help)
    paused = store.update_job(job.model_copy(update={"status": JobStatus.PAUSED, "next_run_at": None}), job.version)
    assert store.advance_jobs([Advance(job.id, now, now + MINUTE, now, now)]) == [False]
    assert store.get_job(job.id) == paused
    assert _due_ids(store, 0) == []


@pytest.mark.parametrize("status", [JobStatus.PAUSED, JobStatus.DELETED, JobStatus.COMPLETED])
def test_advance_of_an_inactive_job_with_a_matching_time_is_refused(
    store: Store, clock: ManualClock, status: JobStatus
) -> None:
    now = clock.now_ms()
    job = _create(store, clock, shard=0, status=status, next_run_at=now)
    assert store.advance_jobs([Advance(job.id, now, now + MINUTE, now, now)]) == [False]
    assert store.get_job(job.id).status is status
    assert _due_ids(store, 0) == []


def test_advance_of_a_missing_job_is_refused(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    ghost = make_job("alice", clock, shards=store.shards)
    assert store.advance_jobs([Advance(ghost.id, now, now + MINUTE, now, now)]) == [False]


def test_completing_advance(store: Store, clock: ManualClock) -> None:
    from datetime import UTC, datetime

    now = clock.now_ms()
    job = _create(store, clock, shard=1, run_at=datetime(2027, 1, 15, 8, 0, tzinfo=UTC), next_run_at=now)
    assert store.advance_jobs([Advance(job.id, now, None, now, now)]) == [True]
    stored = store.get_job(job.id)
    assert stored.status is JobStatus.COMPLETED
    assert stored.next_run_at is None
    assert stored.last_run_at == now
    assert _due_ids(store, 1) == []
    assert [j.id for j in store.list_jobs("alice", status=JobStatus.COMPLETED).items] == [job.id]
    assert store.advance_jobs([Advance(job.id, now, None, now, now)]) == [False]


def test_advance_batch_reports_each_job(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    jobs = [_create(store, clock, shard=i % store.shards, next_run_at=now) for i in range(6)]
    ghost = make_job("alice", clock, shards=store.shards)
    advances = [
        Advance(jobs[0].id, now, now + MINUTE, now, now),
        Advance(jobs[1].id, now - 1, now + MINUTE, now, now),  # stale
        Advance(ghost.id, now, now + MINUTE, now, now),  # missing
        Advance(jobs[2].id, now, None, now, now),  # completes
        Advance(jobs[3].id, now, now + 2 * MINUTE, now, now),
    ]
    assert store.advance_jobs(advances) == [True, False, False, True, True]
    assert store.advance_jobs([]) == []
    assert store.get_job(jobs[0].id).next_run_at == now + MINUTE
    assert store.get_job(jobs[1].id).next_run_at == now
    assert store.get_job(jobs[2].id).status is JobStatus.COMPLETED
    assert store.get_job(jobs[3].id).next_run_at == now + 2 * MINUTE
    assert store.get_job(jobs[4].id).next_run_at == now


def test_advance_does_not_lose_a_concurrent_edit(store: Store, clock: ManualClock) -> None:
    # the scheduler claims a job while the user edits it: whichever order, the edit survives
    now = clock.now_ms()
    job = _create(store, clock, shard=0, next_run_at=now)
    assert store.advance_jobs([Advance(job.id, now, now + MINUTE, now, now)]) == [True]
    current = store.get_job(job.id)
    edited = store.update_job(current.model_copy(update={"name": "edited"}), current.version)
    assert store.get_job(job.id) == edited
    assert edited.next_run_at == now + MINUTE and edited.last_run_at == now


def test_the_same_advance_twice_in_one_batch_applies_once(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    job = _create(store, clock, shard=0, next_run_at=now)
    advance = Advance(job.id, now, now + MINUTE, now, now)
    assert store.advance_jobs([advance, advance]) == [True, False]
    assert store.get_job(job.id).next_run_at == now + MINUTE
