"""Tests for punctual.rules: the run-lease and shard-lease rules as pure functions."""

from __future__ import annotations

import pytest

from punctual import rules
from punctual.errors import InvalidTransition
from punctual.model import MAX_ATTEMPTS_KEPT, Attempt, AttemptOutcome, Run, RunState
from punctual.port import LeaseOutcome, RunChange, ShardLease

pytestmark = pytest.mark.unit

NOW = 1_800_000_000_000
JOB_ID = "job_" + "ab" * 16
LEASE_MS = 90_000


def run(**fields: object) -> Run:
    base: dict[str, object] = {
        "job_id": JOB_ID,
        "scheduled_at": NOW - 1_000,
        "owner": "alice",
        "deadline_at": NOW + 120_000,
        "created_at": NOW - 5_000,
    }
    return Run.model_validate(base | fields)


def running(worker: str = "w1", attempt: int = 1, until: int = NOW + LEASE_MS, **fields: object) -> Run:
    return run(
        state=RunState.RUNNING,
        worker_id=worker,
        attempt=attempt,
        lease_expires_at=until,
        started_at=NOW - 10_000,
        **fields,
    )


def attempt(number: int, outcome: AttemptOutcome = AttemptOutcome.FAILED) -> Attempt:
    return Attempt(number=number, worker_id="w", started_at=NOW, finished_at=NOW, outcome=outcome)


# -- lease_outcome ----------------------------------------------------------------------------


def test_missing_run_is_not_found() -> None:
    assert rules.lease_outcome(None, NOW) is LeaseOutcome.NOT_FOUND


def test_scheduled_run_may_be_leased() -> None:
    assert rules.lease_outcome(run(), NOW) is LeaseOutcome.LEASED


@pytest.mark.parametrize(
    ("next_attempt_at", "outcome"),
    [
        (None, LeaseOutcome.LEASED),
        (NOW - 1, LeaseOutcome.LEASED),
        (NOW, LeaseOutcome.LEASED),  # backoff ends at next_attempt_at inclusive
        (NOW + 1, LeaseOutcome.NOT_READY),
        (NOW + 60_000, LeaseOutcome.NOT_READY),
    ],
)
def test_retrying_run_waits_out_its_backoff(next_attempt_at: int | None, outcome: LeaseOutcome) -> None:
    retrying = run(state=RunState.RETRYING, attempt=1, next_attempt_at=next_attempt_at)
    assert rules.lease_outcome(retrying, NOW) is outcome


@pytest.mark.parametrize(
    ("lease_expires_at", "outcome"),
    [
        (NOW + 1, LeaseOutcome.HELD),
        (NOW, LeaseOutcome.HELD),  # expired means strictly before now
        (NOW - 1, LeaseOutcome.LEASED),
        (NOW - 3_600_000, LeaseOutcome.LEASED),
    ],
)
def test_running_run_is_held_until_its_lease_has_passed(lease_expires_at: int, outcome: LeaseOutcome) -> None:
    assert rules.lease_outcome(running(until=lease_expires_at), NOW) is outcome


def test_running_run_without_a_lease_end_is_held() -> None:
    assert rules.lease_outcome(run(state=RunState.RUNNING, attempt=1, worker_id="w1"), NOW) is LeaseOutcome.HELD


@pytest.mark.parametrize("state", [RunState.SUCCEEDED, RunState.FAILED, RunState.DEAD, RunState.CANCELLED])
def test_terminal_run_is_finished(state: RunState) -> None:
    assert rules.lease_outcome(run(state=state, attempt=1, finished_at=NOW), NOW) is LeaseOutcome.FINISHED


# -- leased -----------------------------------------------------------------------------------


def test_first_lease_starts_attempt_one() -> None:
    after = rules.leased(run(), "w1", NOW, LEASE_MS)
    assert after.state is RunState.RUNNING
    assert after.attempt == 1
    assert after.worker_id == "w1"
    assert after.lease_expires_at == NOW + LEASE_MS
    assert after.deadline_at == NOW + LEASE_MS
    assert after.started_at == NOW
    assert after.attempts == []
    assert after.next_attempt_at is None


def test_lease_after_retry_keeps_first_start_and_clears_backoff() -> None:
    retrying = run(
        state=RunState.RETRYING, attempt=1, started_at=NOW - 60_000, next_attempt_at=NOW - 1, attempts=[attempt(1)]
    )
    after = rules.leased(retrying, "w2", NOW, LEASE_MS)
    assert after.attempt == 2
    assert after.started_at == NOW - 60_000
    assert after.next_attempt_at is None
    assert after.attempts == [attempt(1)]  # a retry is not a takeover: nothing recorded


def test_takeover_records_the_lost_attempt() -> None:
    lost = running(worker="w1", attempt=1, until=NOW - 1)
    after = rules.leased(lost, "w2", NOW, LEASE_MS)
    assert after.attempt == 2
    assert after.worker_id == "w2"
    assert after.lease_expires_at == NOW + LEASE_MS
    assert after.started_at == lost.started_at
    [record] = after.attempts
    assert record.number == 1
    assert record.worker_id == "w1"
    assert record.outcome is AttemptOutcome.LEASE_EXPIRED
    assert record.started_at == lost.started_at
    assert record.finished_at == NOW - 1  # when the lease ran out
    assert record.error


def test_takeover_keeps_only_the_newest_attempt_records() -> None:
    history = [attempt(i) for i in range(1, MAX_ATTEMPTS_KEPT + 1)]
    lost = running(attempt=MAX_ATTEMPTS_KEPT + 1, until=NOW - 1, attempts=history)
    after = rules.leased(lost, "w2", NOW, LEASE_MS)
    assert len(after.attempts) == MAX_ATTEMPTS_KEPT
    assert after.attempts[0].number == 2  # the oldest was dropped
    assert after.attempts[-1].outcome is AttemptOutcome.LEASE_EXPIRED


def test_leased_does_not_mutate_its_input() -> None:
    before = running(until=NOW - 1)
    copy = before.model_copy(deep=True)
    rules.leased(before, "w2", NOW, LEASE_MS)
    assert before == copy


# -- holds_lease / unchanged_since --------------------------------------------------------------


def test_holds_lease() -> None:
    held = running(worker="w1", attempt=2)
    assert rules.holds_lease(held, "w1", 2)
    assert rules.holds_lease(running(worker="w1", attempt=2, until=NOW - 1), "w1", 2)  # expired, not taken over
    assert not rules.holds_lease(held, "w2", 2)
    assert not rules.holds_lease(held, "w1", 1)
    assert not rules.holds_lease(held, "w1", 3)
    assert not rules.holds_lease(None, "w1", 2)
    assert not rules.holds_lease(run(state=RunState.SUCCEEDED, attempt=2, worker_id="w1"), "w1", 2)
    assert not rules.holds_lease(run(state=RunState.RETRYING, attempt=2, worker_id="w1"), "w1", 2)


def test_unchanged_since() -> None:
    read = running(attempt=1)
    assert rules.unchanged_since(read, read)
    assert rules.unchanged_since(read.model_copy(update={"note": "x", "attempts": [attempt(1)]}), read)
    assert not rules.unchanged_since(None, read)
    assert not rules.unchanged_since(read.model_copy(update={"state": RunState.SUCCEEDED}), read)
    assert not rules.unchanged_since(read.model_copy(update={"attempt": 2}), read)
    assert not rules.unchanged_since(read.model_copy(update={"lease_expires_at": NOW + 1}), read)  # heartbeat


# -- apply_change -----------------------------------------------------------------------------


def test_finish_success_clears_the_lease_and_appends_the_attempt() -> None:
    record = attempt(1, AttemptOutcome.SUCCEEDED)
    change = RunChange(state=RunState.SUCCEEDED, now=NOW, deadline_at=NOW, append=record, finished_at=NOW)
    after = rules.apply_change(running(), change)
    assert after.state is RunState.SUCCEEDED
    assert after.finished_at == NOW
    assert after.deadline_at == NOW
    assert after.worker_id is None and after.lease_expires_at is None
    assert after.attempts == [record]
    assert after.attempt == 1


def test_retry_sets_the_backoff() -> None:
    change = RunChange(
        state=RunState.RETRYING, now=NOW, deadline_at=NOW + 70_000, append=attempt(1), next_attempt_at=NOW + 10_000
    )
    after = rules.apply_change(running(), change)
    assert after.state is RunState.RETRYING
    assert after.next_attempt_at == NOW + 10_000
    assert after.deadline_at == NOW + 70_000
    assert after.finished_at is None
    assert after.worker_id is None


def test_leaving_retrying_clears_next_attempt_at() -> None:
    retrying = run(state=RunState.RETRYING, attempt=1, next_attempt_at=NOW + 10_000)
    change = RunChange(state=RunState.DEAD, now=NOW, deadline_at=NOW, finished_at=NOW, note="dead-lettered")
    after = rules.apply_change(retrying, change)
    assert after.next_attempt_at is None
    assert after.note == "dead-lettered"


def test_none_fields_are_left_unchanged() -> None:
    before = running(note="keep", finished_at=None)
    after = rules.apply_change(
        before, RunChange(state=RunState.RUNNING, now=NOW, deadline_at=NOW + 5, clear_lease=False)
    )
    assert after.note == "keep"
    assert after.attempt == before.attempt
    assert after.worker_id == before.worker_id
    assert after.lease_expires_at == before.lease_expires_at
    assert after.attempts == before.attempts


def test_change_may_set_the_attempt() -> None:
    after = rules.apply_change(
        running(attempt=1), RunChange(state=RunState.RETRYING, now=NOW, deadline_at=NOW, attempt=2, next_attempt_at=NOW)
    )
    assert after.attempt == 2


def test_apply_change_bounds_the_attempts() -> None:
    full = running(attempts=[attempt(i) for i in range(1, MAX_ATTEMPTS_KEPT + 1)])
    change = RunChange(state=RunState.FAILED, now=NOW, deadline_at=NOW, append=attempt(99), finished_at=NOW)
    after = rules.apply_change(full, change)
    assert len(after.attempts) == MAX_ATTEMPTS_KEPT
    assert [a.number for a in after.attempts] == [*range(2, MAX_ATTEMPTS_KEPT + 1), 99]


def test_bounded() -> None:
    assert rules.bounded([]) == []
    few = [attempt(i) for i in range(3)]
    assert rules.bounded(few) == few
    many = [attempt(i) for i in range(MAX_ATTEMPTS_KEPT + 5)]
    assert rules.bounded(many) == many[5:]


# -- shard leases -----------------------------------------------------------------------------


def test_shard_lease_rules() -> None:
    held = ShardLease(3, "s1", 4, NOW + 10)
    assert rules.may_acquire_shard(None, "s1", NOW)
    assert rules.may_acquire_shard(held, "s1", NOW)
    assert not rules.may_acquire_shard(held, "s2", NOW)
    assert not rules.may_acquire_shard(ShardLease(3, "s1", 4, NOW), "s2", NOW)  # expires_at == now: held
    assert rules.may_acquire_shard(ShardLease(3, "s1", 4, NOW - 1), "s2", NOW)


@pytest.mark.parametrize(
    ("owner", "previous", "succeeds"),
    [
        ("scheduler-0@101", "scheduler-0@100", True),  # the next minute's invocation of instance 0
        ("scheduler-0@200", "scheduler-0@100", True),
        ("scheduler-0@100", "scheduler-0@100", False),  # itself: a renewal, not a hand-over
        ("scheduler-0@99", "scheduler-0@100", False),  # a late predecessor never takes over
        ("scheduler-1@101", "scheduler-0@100", False),  # another instance
        ("scheduler-10@101", "scheduler-1@100", False),
        ("scheduler-0@101", "scheduler-0", False),  # owners without a generation never hand over
        ("scheduler-0", "scheduler-0@100", False),
        ("scheduler-0@x", "scheduler-0@1", False),
        ("a@b@2", "a@b@1", True),  # the generation is what follows the last "@"
    ],
)
def test_a_later_generation_of_an_instance_succeeds_it(owner: str, previous: str, succeeds: bool) -> None:
    assert rules.succeeds(owner, previous) is succeeds
    live = ShardLease(3, previous, 4, NOW + 10)
    assert rules.may_acquire_shard(live, owner, NOW) is (succeeds or owner == previous)


def test_a_hand_over_moves_the_epoch_on() -> None:
    taken = rules.acquired(ShardLease(3, "scheduler-0@100", 4, NOW + 10), 3, "scheduler-0@101", NOW, 1_000)
    assert taken == ShardLease(3, "scheduler-0@101", 5, NOW + 1_000)  # the predecessor's renewals now fail


def test_acquired_epochs() -> None:
    first = rules.acquired(None, 3, "s1", NOW, 1_000)
    assert first == ShardLease(3, "s1", 1, NOW + 1_000)
    renewed = rules.acquired(first, 3, "s1", NOW + 500, 1_000)
    assert renewed == ShardLease(3, "s1", 1, NOW + 1_500)  # same owner, live: same epoch
    taken = rules.acquired(renewed, 3, "s2", NOW + 2_000, 1_000)
    assert taken == ShardLease(3, "s2", 2, NOW + 3_000)
    # the owner comes back after its lease expired: the epoch moves on, so a fenced write
    # from its previous tenure cannot pass as current
    back = rules.acquired(ShardLease(3, "s1", 5, NOW - 1), 3, "s1", NOW, 1_000)
    assert back.epoch == 6


# -- lifecycle rules stated once (issue 16) ------------------------------------------------------


@pytest.mark.parametrize(
    ("attempt", "max_retries", "allowed"), [(1, 0, True), (2, 0, False), (4, 3, True), (5, 3, False)]
)
def test_every_attempt_counts_lost_ones_too(attempt: int, max_retries: int, allowed: bool) -> None:
    assert rules.attempt_allowed(attempt, max_retries) is allowed


def test_a_terminal_run_cannot_reopen_but_may_keep_its_state() -> None:
    with pytest.raises(InvalidTransition):
        rules.check_transition(RunState.SUCCEEDED, RunState.RETRYING)
    with pytest.raises(InvalidTransition):
        rules.check_transition(RunState.SCHEDULED, RunState.SUCCEEDED)  # only a leased run finishes
    rules.check_transition(RunState.CANCELLED, RunState.CANCELLED)  # a log entry, not a transition
    rules.check_transition(RunState.RUNNING, RunState.SUCCEEDED)
