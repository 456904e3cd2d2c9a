"""History retention: the embedded engine purges what DynamoDB's TTL expires on the aws engine."""

from __future__ import annotations

import pytest

from punctual.clock import ManualClock
from punctual.errors import JobNotFound, RunNotFound
from punctual.model import JobStatus, RunState
from punctual.port import Alert, Engine
from punctual.tenancy import rates
from tests.contract.factories import MINUTE, make_job, make_run

pytestmark = pytest.mark.contract

DAY_MS = 86_400_000


def test_purge_removes_expired_history_and_keeps_the_rest(engine: Engine, engine_kind: str, clock: ManualClock) -> None:
    store = engine.store
    now = clock.now_ms()
    job = make_job("owner-a", clock, shards=store.shards)
    store.create_job(job)
    expired_done = make_run(job, now - 2 * MINUTE, clock, state=RunState.SUCCEEDED, expires_at=now // 1000 - 1)
    expired_open = make_run(job, now - MINUTE, clock, state=RunState.RUNNING, expires_at=now // 1000 - 1)
    current_done = make_run(job, now, clock, state=RunState.FAILED)
    store.insert_runs([expired_done, expired_open, current_done])
    old_deleted = make_job(
        "owner-a", clock, shards=store.shards, status=JobStatus.DELETED, created_at=now - 40 * DAY_MS
    )
    new_deleted = make_job("owner-a", clock, shards=store.shards, status=JobStatus.DELETED)
    store.create_job(old_deleted)
    store.create_job(new_deleted)

    purged = store.purge_expired(now, deleted_before=now - 30 * DAY_MS, limit=100)

    if engine_kind == "aws":  # DynamoDB's TTL deletes these by itself, without write units
        assert purged == 0
        store.get_run(job.id, expired_done.scheduled_at)
        return
    assert purged == 2
    with pytest.raises(RunNotFound):
        store.get_run(job.id, expired_done.scheduled_at)
    with pytest.raises(JobNotFound):
        store.get_job(old_deleted.id)
    # an open run is never purged, whatever its expiry; current history and jobs stay
    assert store.get_run(job.id, expired_open.scheduled_at).state is RunState.RUNNING
    assert store.get_run(job.id, current_done.scheduled_at).state is RunState.FAILED
    assert store.get_job(new_deleted.id).status is JobStatus.DELETED
    assert store.get_job(job.id).status is JobStatus.ACTIVE


def test_purge_is_bounded_by_its_limit(engine: Engine, engine_kind: str, clock: ManualClock) -> None:
    store = engine.store
    now = clock.now_ms()
    job = make_job("owner-a", clock, shards=store.shards)
    store.create_job(job)
    runs = [
        make_run(job, now - i * MINUTE, clock, state=RunState.SUCCEEDED, expires_at=now // 1000 - 1)
        for i in range(1, 6)
    ]
    store.insert_runs(runs)
    expected = (0, 0) if engine_kind == "aws" else (3, 2)
    assert (store.purge_expired(now, now, limit=3), store.purge_expired(now, now, limit=3)) == expected


def test_purge_removes_old_alerts_and_rate_records_that_decide_nothing(
    engine: Engine, engine_kind: str, clock: ManualClock
) -> None:
    # Given alerts older and younger than the retention, rate records of owners (and keyed scopes)
    # that started a run 3 minutes ago and just now, and slot-wait marks that lapsed and that last
    store = engine.store
    now = clock.now_ms()
    retention = now - 30 * DAY_MS
    old_alert = Alert("owner-a", "run_old", "job_a", retention - 1, "dead")
    new_alert = Alert("owner-a", "run_new", "job_a", retention, "dead")
    assert [store.record_alert(a) for a in (old_alert, new_alert)] == [True, True]
    assert rates.take(store, "idle-owner", 6, now - 3 * MINUTE) is None
    assert rates.take(store, "~limit:idle-key", 1, now - 3 * MINUTE) is None
    assert rates.take(store, "busy-owner", 6, now) is None
    store.mark_slot_wait("idle-owner", 9, now - 2 * MINUTE)
    store.mark_slot_wait("busy-owner", 9, now + MINUTE)

    # When the reaper purges (at most 3 rows, then the rest)
    first, second = store.purge_expired(now, retention, limit=3), store.purge_expired(now, retention, limit=3)

    if engine_kind == "aws":  # DynamoDB's TTL expires alerts and rate records by itself
        assert (first, second) == (0, 0)
        return
    # Then what can no longer matter is gone, within the bound, and the rest stays
    assert (first, second) == (3, 1)
    assert [a.run_id for a in store.list_alerts("owner-a")] == ["run_new"]
    assert store.get_rate_state("idle-owner") is None and store.get_rate_state("~limit:idle-key") is None
    assert store.get_rate_state("busy-owner") is not None
    scopes = store._db.connection().execute("SELECT owner FROM tenant_starts ORDER BY owner")  # type: ignore[attr-defined]
    assert [row[0] for row in scopes] == ["busy-owner", "~waits:busy-owner"]
    # and a purged scope starts afresh
    assert rates.take(store, "idle-owner", 6, now) is None
