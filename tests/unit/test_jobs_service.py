"""The job service (punctual.jobs.service) on the embedded engine with a manual clock.

The rules the API relies on: first due times, idempotent create, owner isolation, merge-patch
updates that recompute next_run_at, the status lifecycle, resume handing missed times to the
catch-up policy, manual triggers, and optimistic writes that retry.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from punctual import ids
from punctual.clock import ManualClock, to_datetime
from punctual.engines.embedded import EmbeddedEngine
from punctual.errors import (
    ConcurrentModification,
    IdempotencyKeyReused,
    InvalidId,
    InvalidInput,
    InvalidTransition,
    JobNotFound,
    RunNotFound,
)
from punctual.jobs import checks, lifecycle
from punctual.jobs import runs as job_runs
from punctual.jobs import service as jobs
from punctual.model import HttpTarget, Job, JobSpec, JobStatus, RunState, Trigger
from punctual.port import Advance, RunQuery, Store
from punctual.scheduling import cron as schedule

pytestmark = pytest.mark.unit

NOW = 1_800_000_000_000  # 2027-01-15T08:00:00Z
SHARDS = 4


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def engine(tmp_path: Path, clock: ManualClock) -> Iterator[EmbeddedEngine]:
    engine = EmbeddedEngine(tmp_path / "punctual.db", shards=SHARDS, clock=clock)
    yield engine
    engine.close()


@pytest.fixture
def store(engine: EmbeddedEngine) -> Store:
    return engine.store


def cron(**overrides: Any) -> JobSpec:
    fields: dict[str, Any] = {
        "name": "report",
        "schedule": "0 * * * *",
        "target": {"type": "http", "url": "https://example.com/hook"},
        "payload": {"n": 1},
    }
    fields.update(overrides)
    return JobSpec.model_validate({k: v for k, v in fields.items() if v is not None})


def once(at_ms: int, **overrides: Any) -> JobSpec:
    return cron(schedule=None, run_at=to_datetime(at_ms), **overrides)


def due_ids(store: Store, until: int) -> set[str]:
    return {d.job_id for shard in range(SHARDS) for d in store.due_jobs(shard, until, 100)}


# -- create -------------------------------------------------------------------------------------------


def test_create_cron_job_is_due_at_the_next_fire_time(store: Store) -> None:
    created = jobs.create_job(store, "alice", cron(), NOW + 1)
    job = created.job
    assert not created.replayed
    assert job.status is JobStatus.ACTIVE and job.version == 1 and job.owner == "alice"
    assert job.next_run_at == schedule.next_fire("0 * * * *", "UTC", NOW + 1) == NOW + 3_600_000
    assert job.due_shard == ids.shard_of(job.id, SHARDS)
    assert store.get_job(job.id) == job
    assert due_ids(store, NOW + 3_600_000) == {job.id}


def test_one_time_job_is_due_at_run_at_and_the_past_is_refused(store: Store) -> None:
    job = jobs.create_job(store, "alice", once(NOW + 60_000), NOW).job
    assert job.next_run_at == NOW + 60_000
    # Within the tolerance (clock skew between client and us) is accepted ...
    assert jobs.create_job(store, "alice", once(NOW - 500), NOW).job.next_run_at == NOW - 500
    # ... beyond it is refused, naming the field, and nothing is written
    with pytest.raises(InvalidInput) as refused:
        jobs.create_job(store, "alice", once(NOW - 5_000), NOW)
    assert refused.value.field == "run_at"
    assert len(jobs.list_jobs(store, "alice").items) == 2


def test_same_idempotency_key_and_spec_replays_the_job(store: Store) -> None:
    first = jobs.create_job(store, "alice", cron(), NOW, idempotency_key="k-1")
    again = jobs.create_job(store, "alice", cron(), NOW + 5_000, idempotency_key="k-1")
    assert again.replayed and again.job == first.job
    assert first.job.id == ids.job_id_for_idempotency_key("alice", "k-1")
    assert [j.id for j in jobs.list_jobs(store, "alice").items] == [first.job.id]


def test_same_key_with_another_spec_is_refused(store: Store) -> None:
    jobs.create_job(store, "alice", cron(), NOW, idempotency_key="k-1")
    with pytest.raises(IdempotencyKeyReused):
        jobs.create_job(store, "alice", cron(name="other"), NOW, idempotency_key="k-1")


def test_keys_belong_to_their_owner(store: Store) -> None:
    mine = jobs.create_job(store, "alice", cron(), NOW, idempotency_key="k-1").job
    theirs = jobs.create_job(store, "bob", cron(name="other"), NOW, idempotency_key="k-1").job
    assert mine.id != theirs.id and theirs.owner == "bob"


def test_replay_compares_run_at_as_an_instant(store: Store) -> None:
    at = datetime(2027, 1, 15, 10, 0, tzinfo=UTC)
    jobs.create_job(store, "alice", cron(schedule=None, run_at=at), NOW, idempotency_key="k")
    berlin = at.astimezone(timezone(timedelta(hours=1)))
    assert jobs.create_job(store, "alice", cron(schedule=None, run_at=berlin), NOW, idempotency_key="k").replayed


def test_replay_after_run_at_passed_is_still_a_replay(store: Store) -> None:
    first = jobs.create_job(store, "alice", once(NOW + 1_000), NOW, idempotency_key="k")
    again = jobs.create_job(store, "alice", once(NOW + 1_000), NOW + 60_000, idempotency_key="k")
    assert again.replayed and again.job.id == first.job.id
    with pytest.raises(InvalidInput):  # without the key it is simply in the past
        jobs.create_job(store, "alice", once(NOW + 1_000), NOW + 60_000)


@pytest.mark.parametrize("key", ["", "has space", "x" * 256, "tab\tkey", "ünïcode"])
def test_malformed_idempotency_keys_are_refused(store: Store, key: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        jobs.create_job(store, "alice", cron(), NOW, idempotency_key=key)
    assert refused.value.field == "Idempotency-Key"


# -- ownership ---------------------------------------------------------------------------------------


def test_another_owners_job_is_not_found_with_the_same_message_as_a_missing_one(store: Store) -> None:
    job = jobs.create_job(store, "alice", cron(), NOW).job
    with pytest.raises(JobNotFound) as foreign:
        jobs.get_job(store, "bob", job.id)
    missing = "job_" + "0" * 32
    with pytest.raises(JobNotFound) as absent:
        jobs.get_job(store, "bob", missing)
    assert foreign.value.message.replace(job.id, "ID") == absent.value.message.replace(missing, "ID")
    for action in (lifecycle.pause_job, lifecycle.resume_job, lifecycle.delete_job):
        with pytest.raises(JobNotFound):
            action(store, "bob", job.id, NOW)
    with pytest.raises(JobNotFound):
        job_runs.list_runs(store, "bob", job.id, RunQuery())
    assert jobs.list_jobs(store, "bob").items == []


def test_malformed_ids_are_invalid_not_missing(store: Store) -> None:
    with pytest.raises(InvalidId):
        jobs.get_job(store, "alice", "job-1")
    with pytest.raises(InvalidId):
        job_runs.get_run(store, "alice", "run_1")


# -- update -------------------------------------------------------------------------------------------


def test_update_without_schedule_change_keeps_next_run_at(store: Store) -> None:
    job = jobs.create_job(store, "alice", cron(), NOW).job
    updated = jobs.update_job(store, "alice", job.id, {"payload": {"n": 2}, "timeout_s": 5}, NOW + 10)
    assert updated.payload == {"n": 2} and updated.timeout_s == 5
    assert updated.next_run_at == job.next_run_at and updated.version == 2 and updated.updated_at == NOW + 10


def test_update_of_the_schedule_recomputes_next_run_at(store: Store) -> None:
    job = jobs.create_job(store, "alice", cron(), NOW).job
    updated = jobs.update_job(store, "alice", job.id, {"schedule": "*/5 * * * *"}, NOW + 10)
    assert updated.next_run_at == NOW + 300_000
    zoned = jobs.update_job(store, "alice", job.id, {"schedule": "0 9 * * *", "timezone": "Asia/Tokyo"}, NOW)
    assert zoned.next_run_at == schedule.next_fire("0 9 * * *", "Asia/Tokyo", NOW)


def test_update_switches_between_cron_and_one_time_with_merge_patch_nulls(store: Store) -> None:
    job = jobs.create_job(store, "alice", cron(timeout_s=30), NOW).job
    run_at = to_datetime(NOW + 90_000).isoformat()
    one_time = jobs.update_job(store, "alice", job.id, {"schedule": None, "run_at": run_at, "timeout_s": None}, NOW)
    assert one_time.schedule is None and one_time.next_run_at == NOW + 90_000
    assert one_time.timeout_s == 60  # null resets to the default
    with pytest.raises(InvalidInput):  # both schedules at once
        jobs.update_job(store, "alice", job.id, {"schedule": "* * * * *"}, NOW)


def test_invalid_updates_name_the_field_and_change_nothing(store: Store) -> None:
    job = jobs.create_job(store, "alice", cron(), NOW).job
    with pytest.raises(InvalidInput) as bad:
        jobs.update_job(store, "alice", job.id, {"timeout_s": 0, "color": "blue"}, NOW)
    assert {d["field"] for d in bad.value.details} == {"timeout_s", "color"}
    with pytest.raises(InvalidInput) as cron_error:
        jobs.update_job(store, "alice", job.id, {"schedule": "61 * * * *"}, NOW)
    assert [d["field"] for d in cron_error.value.details] == ["schedule"]
    assert "'minute'" in cron_error.value.details[0]["message"]
    with pytest.raises(InvalidInput) as past:
        jobs.update_job(store, "alice", job.id, {"schedule": None, "run_at": to_datetime(NOW - 60_000)}, NOW)
    assert past.value.field == "run_at"
    assert store.get_job(job.id) == job


def test_update_of_a_paused_job_keeps_it_paused(store: Store) -> None:
    job = jobs.create_job(store, "alice", cron(), NOW).job
    lifecycle.pause_job(store, "alice", job.id, NOW)
    updated = jobs.update_job(store, "alice", job.id, {"schedule": "*/5 * * * *"}, NOW)
    assert updated.status is JobStatus.PAUSED and updated.next_run_at is None


def test_a_completed_one_time_job_given_a_new_run_at_becomes_active(store: Store) -> None:
    job = jobs.create_job(store, "alice", once(NOW + 1_000), NOW).job
    assert store.advance_jobs([Advance(job.id, NOW + 1_000, None, NOW + 1_000, NOW + 1_000)]) == [True]
    assert store.get_job(job.id).status is JobStatus.COMPLETED
    renamed = jobs.update_job(store, "alice", job.id, {"name": "renamed"}, NOW + 2_000)
    assert renamed.status is JobStatus.COMPLETED
    again = jobs.update_job(store, "alice", job.id, {"run_at": to_datetime(NOW + 60_000)}, NOW + 2_000)
    assert again.status is JobStatus.ACTIVE and again.next_run_at == NOW + 60_000
    assert job.id in due_ids(store, NOW + 60_000)


def test_empty_update_is_a_read(store: Store) -> None:
    job = jobs.create_job(store, "alice", cron(), NOW).job
    assert jobs.update_job(store, "alice", job.id, {}, NOW) == job


def test_an_empty_update_of_a_deleted_job_is_refused_like_any_other(store: Store) -> None:
    # issue 26: docs/api.md says every PATCH of a deleted job is 409; PATCH {} answered 200
    job = jobs.create_job(store, "alice", cron(), NOW).job
    lifecycle.delete_job(store, "alice", job.id, NOW)
    with pytest.raises(InvalidTransition):
        jobs.update_job(store, "alice", job.id, {}, NOW)


# -- lifecycle ----------------------------------------------------------------------------------------


def test_pause_leaves_the_due_index_and_is_idempotent(store: Store) -> None:
    job = jobs.create_job(store, "alice", cron(), NOW).job
    paused = lifecycle.pause_job(store, "alice", job.id, NOW + 1)
    assert paused.status is JobStatus.PAUSED and paused.next_run_at is None
    assert due_ids(store, NOW + 10 * 3_600_000) == set()
    assert lifecycle.pause_job(store, "alice", job.id, NOW + 2) == paused  # no second write


def test_resume_hands_times_missed_while_paused_to_the_catch_up_policy(store: Store) -> None:
    job = jobs.create_job(store, "alice", cron(), NOW).job
    lifecycle.pause_job(store, "alice", job.id, NOW)
    # Resumed three hours later: due at the first time after its last run (created, never run),
    # which is in the past, so the scheduler's catch-up policy decides what runs
    resumed = lifecycle.resume_job(store, "alice", job.id, NOW + 3 * 3_600_000 + 60_000)
    assert resumed.status is JobStatus.ACTIVE and resumed.next_run_at == NOW + 3_600_000
    assert job.id in due_ids(store, NOW + 3_600_000)
    assert lifecycle.resume_job(store, "alice", job.id, NOW) == resumed  # already active: no-op


def test_resume_after_runs_continues_after_the_last_run(store: Store) -> None:
    job = jobs.create_job(store, "alice", cron(), NOW).job
    first = NOW + 3_600_000
    assert store.advance_jobs([Advance(job.id, first, first + 3_600_000, first, first)]) == [True]
    lifecycle.pause_job(store, "alice", job.id, first + 10)
    resumed = lifecycle.resume_job(store, "alice", job.id, first + 10 * 3_600_000)
    assert resumed.next_run_at == first + 3_600_000


def test_deleted_jobs_leave_the_index_stay_readable_and_refuse_changes(store: Store, engine: EmbeddedEngine) -> None:
    job = jobs.create_job(store, "alice", cron(), NOW).job
    deleted = lifecycle.delete_job(store, "alice", job.id, NOW + 5)
    assert deleted.status is JobStatus.DELETED and deleted.next_run_at is None
    assert jobs.get_job(store, "alice", job.id).status is JobStatus.DELETED
    assert jobs.list_jobs(store, "alice").items == []
    assert [j.id for j in jobs.list_jobs(store, "alice", status=JobStatus.DELETED).items] == [job.id]
    assert due_ids(store, NOW + 10 * 3_600_000) == set()
    assert lifecycle.delete_job(store, "alice", job.id, NOW + 6) == deleted  # idempotent
    for refused in (
        lambda: lifecycle.pause_job(store, "alice", job.id, NOW),
        lambda: lifecycle.resume_job(store, "alice", job.id, NOW),
        lambda: jobs.update_job(store, "alice", job.id, {"name": "x"}, NOW),
        lambda: job_runs.trigger_job(store, engine.queue, "alice", job.id, NOW),
    ):
        with pytest.raises(InvalidTransition):
            refused()


def test_a_completed_job_cannot_be_paused_or_resumed(store: Store) -> None:
    job = jobs.create_job(store, "alice", once(NOW + 1_000), NOW).job
    store.advance_jobs([Advance(job.id, NOW + 1_000, None, NOW + 1_000, NOW + 1_000)])
    with pytest.raises(InvalidTransition):
        lifecycle.pause_job(store, "alice", job.id, NOW + 2_000)
    with pytest.raises(InvalidTransition):
        lifecycle.resume_job(store, "alice", job.id, NOW + 2_000)


# -- runs ---------------------------------------------------------------------------------------------


def test_trigger_inserts_a_manual_run_and_sends_its_dispatch(store: Store, engine: EmbeddedEngine) -> None:
    job = jobs.create_job(store, "alice", cron(), NOW).job
    lifecycle.pause_job(store, "alice", job.id, NOW)  # a paused job can still be run by hand
    run = job_runs.trigger_job(store, engine.queue, "alice", job.id, NOW + 7, retention_s=60)
    assert run.trigger is Trigger.MANUAL and run.state is RunState.SCHEDULED and run.scheduled_at == NOW + 7
    assert run.expires_at == (NOW + 7) // 1000 + 60 and run.deadline_at > NOW + 7
    assert job_runs.get_run(store, "alice", run.run_id) == run
    deliveries = engine.queue.receive(10, visibility_s=30)
    assert [d.run_id for d in deliveries] == [run.run_id]
    # The same millisecond names the same run: no second row
    assert job_runs.trigger_job(store, engine.queue, "alice", job.id, NOW + 7).run_id == run.run_id
    assert len(job_runs.list_runs(store, "alice", job.id, RunQuery()).items) == 1


def test_runs_of_another_owner_are_not_found(store: Store, engine: EmbeddedEngine) -> None:
    job = jobs.create_job(store, "alice", cron(), NOW).job
    run = job_runs.trigger_job(store, engine.queue, "alice", job.id, NOW)
    with pytest.raises(RunNotFound):
        job_runs.get_run(store, "bob", run.run_id)
    with pytest.raises(RunNotFound):
        job_runs.get_run(store, "alice", ids.run_id_for(job.id, run.scheduled_at + 1))
    with pytest.raises(JobNotFound):
        job_runs.trigger_job(store, engine.queue, "bob", job.id, NOW)


def test_list_runs_checks_its_query(store: Store) -> None:
    job = jobs.create_job(store, "alice", cron(), NOW).job
    with pytest.raises(InvalidInput) as reversed_range:
        job_runs.list_runs(store, "alice", job.id, RunQuery(since=NOW + 1, until=NOW))
    assert reversed_range.value.field == "since"
    for limit in (0, checks.MAX_PAGE + 1):
        with pytest.raises(InvalidInput):
            job_runs.list_runs(store, "alice", job.id, RunQuery(limit=limit))


# -- optimistic writes --------------------------------------------------------------------------------


class RacingStore:
    """A store whose next ``races`` update_job calls lose to a concurrent rename."""

    def __init__(self, inner: Store, races: int) -> None:
        self.inner = inner
        self.races = races

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def update_job(self, job: Job, expected_version: int) -> Job:
        if self.races > 0:
            self.races -= 1
            current = self.inner.get_job(job.id)
            self.inner.update_job(current.model_copy(update={"name": f"raced-{self.races}"}), current.version)
        return self.inner.update_job(job, expected_version)


def test_a_lost_race_is_retried_on_a_fresh_read(store: Store) -> None:
    job = jobs.create_job(store, "alice", cron(), NOW).job
    racing: Any = RacingStore(store, races=1)
    updated = jobs.update_job(racing, "alice", job.id, {"payload": {"n": 9}}, NOW)
    assert updated.payload == {"n": 9} and updated.name == "raced-0"  # both changes kept
    assert updated.version == 3


def test_too_many_lost_races_surface_as_a_conflict(store: Store) -> None:
    job = jobs.create_job(store, "alice", cron(), NOW).job
    racing: Any = RacingStore(store, races=jobs.WRITE_ATTEMPTS)
    with pytest.raises(ConcurrentModification):
        lifecycle.pause_job(racing, "alice", job.id, NOW)


def test_http_target_type_round_trips(store: Store) -> None:
    job = jobs.create_job(store, "alice", cron(), NOW).job
    assert isinstance(store.get_job(job.id).target, HttpTarget)
