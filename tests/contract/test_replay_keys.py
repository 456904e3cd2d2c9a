"""A replay with an ``Idempotency-Key`` (``punctual.jobs.replay_keys``) on both engines: a repeat starts
nothing again and answers the first count; another request with the key is refused; a request that
died half way is refused while it may still be at work, then carried on by a retry that starts only
what is missing; two requests carrying one key out at once insert each replay once (the instants are
derived, so the second insert is the engines' duplicate no-op); a key expires after a day."""

from __future__ import annotations

from typing import Any, cast

import pytest

from punctual.errors import IdempotencyKeyInUse, IdempotencyKeyReused
from punctual.jobs import replay, replay_keys
from punctual.jobs.replay import ReplayOptions, ReplayQuery
from punctual.jobs.replay_keys import replay_with_key
from punctual.model import RunState, Trigger
from punctual.port import Dispatch, Engine, Queue, RunQuery
from punctual.scheduling.planning import off_schedule
from tests.contract.factories import MINUTE, drain
from tests.contract.test_replay import DEAD_ONLY, ended_runs, new_job

pytestmark = pytest.mark.contract

OWNER = "owner-replay-keys"
OPTIONS = ReplayOptions()


def replays_of(engine: Engine, *jobs: Any) -> list[str]:
    """The ``replay_of`` of every replay of ``jobs``, sorted (a run twice would show twice)."""
    runs = [r for job in jobs for r in engine.store.list_runs(job.id, RunQuery(limit=500)).items]
    return sorted(r.replay_of or "" for r in runs if r.trigger is Trigger.REPLAY)


class DyingQueue:
    """A queue whose process dies (SystemExit: no ``except Exception`` sees it) on the first send."""

    def send(self, dispatches: list[Dispatch]) -> None:
        raise SystemExit("the API process died here")


def test_a_repeat_starts_nothing_and_another_request_with_the_key_is_refused(engine, clock):
    # Given three dead runs of a job
    start = clock.now_ms() - 60 * MINUTE
    job = new_job(engine, clock, owner=OWNER)
    dead = ended_runs(engine, clock, job, 3, RunState.DEAD, start)
    query = ReplayQuery(since=start, until=clock.now_ms(), states=DEAD_ONLY)
    # When they are replayed with a key, and the same request comes again (a retried call)
    first = replay_with_key(engine.store, engine.queue, OWNER, query, "k-1", clock=clock, options=OPTIONS)
    clock.advance(MINUTE)
    again = replay_with_key(engine.store, engine.queue, OWNER, query, "k-1", clock=clock, options=OPTIONS)
    # Then the first started one run each, the repeat nothing, and both answer the same count
    assert (first.count, len(first.runs), first.repeated) == (3, 3, False)
    assert (again.count, again.runs, again.repeated) == (3, [], True)
    assert replays_of(engine, job) == sorted(r.run_id for r in dead)
    assert len(drain(engine.queue)) == 3
    # And the key with another request is refused, writing nothing
    other = ReplayQuery(since=start, until=clock.now_ms(), states=frozenset({RunState.FAILED}))
    with pytest.raises(IdempotencyKeyReused) as refused:
        replay_with_key(engine.store, engine.queue, OWNER, other, "k-1", clock=clock, options=OPTIONS)
    assert refused.value.field == "Idempotency-Key"
    # the same key is another owner's own: it replays that owner's runs (none here)
    assert (
        replay_with_key(engine.store, engine.queue, "someone-else", query, "k-1", clock=clock, options=OPTIONS).count
        == 0
    )
    # After a day the key may name a new request
    clock.advance(replay_keys.KEY_WINDOW_MS)
    later = replay_with_key(engine.store, engine.queue, OWNER, query, "k-1", clock=clock, options=OPTIONS)
    assert (later.count, len(later.runs), later.repeated) == (3, 3, False)
    assert replays_of(engine, job) == sorted([r.run_id for r in dead] * 2)


def test_a_request_that_died_half_way_is_refused_then_carried_on_once(engine, clock):
    # Given dead runs of two jobs, the first job's older
    start = clock.now_ms() - 60 * MINUTE
    early, late = new_job(engine, clock, owner=OWNER), new_job(engine, clock, owner=OWNER)
    dead = ended_runs(engine, clock, early, 3, RunState.DEAD, start) + ended_runs(
        engine, clock, late, 2, RunState.FAILED, start + 30 * MINUTE
    )
    query = ReplayQuery(since=start, until=clock.now_ms(), states=DEAD_ONLY)
    # When the request's process dies after inserting the first job's replays, before sending them
    with pytest.raises(SystemExit):
        replay_with_key(engine.store, cast(Queue, DyingQueue()), OWNER, query, "k-2", clock=clock, options=OPTIONS)
    assert len(replays_of(engine, early, late)) == 3
    # Then a retry while it might still be at work is refused, with when to try again, writing nothing
    clock.advance(10_000)
    with pytest.raises(IdempotencyKeyInUse) as busy:
        replay_with_key(engine.store, engine.queue, OWNER, query, "k-2", clock=clock, options=OPTIONS)
    assert 1 <= busy.value.retry_after_s <= 5
    assert len(replays_of(engine, early, late)) == 3
    # And a retry after its lease carries it on: only the missing replays start, each original once
    clock.advance(replay_keys.LEASE_MS)
    carried = replay_with_key(engine.store, engine.queue, OWNER, query, "k-2", clock=clock, options=OPTIONS)
    assert (carried.count, sorted(r.replay_of or "" for r in carried.runs)) == (5, sorted(r.run_id for r in dead[3:]))
    assert replays_of(engine, early, late) == sorted(r.run_id for r in dead)
    assert sorted(d.run_id for d in drain(engine.queue)) == sorted(r.run_id for r in carried.runs)
    # (the first job's replays, inserted and never sent, are the reaper's: past their deadline it sends them)
    answered = replay_with_key(engine.store, engine.queue, OWNER, query, "k-2", clock=clock, options=OPTIONS)
    assert (answered.count, answered.repeated) == (5, True)


def test_two_requests_carrying_one_key_out_at_once_insert_each_replay_once(engine, clock):
    # Given dead runs, and two requests that both carry one key out from its instant (the second
    # took over while the first still worked, or both claimed at the same millisecond)
    start = clock.now_ms() - 60 * MINUTE
    job = new_job(engine, clock, owner=OWNER)
    dead = ended_runs(engine, clock, job, 4, RunState.DEAD, start)
    at = clock.now_ms()
    query = ReplayQuery(since=start, until=at, states=DEAD_ONLY)
    found = replay.find(engine.store, OWNER, query, at)
    # a run of the job holds one of the instants: both move that replay on alike
    engine.store.insert_runs(
        [dead[0].model_copy(update={"scheduled_at": off_schedule(at, 2), "state": RunState.SCHEDULED})]
    )
    # When both insert (the first half way when the second starts: it left two of four)
    half = replay.Found(found.jobs, found.originals[:2])
    first = replay.start(engine.store, engine.queue, OWNER, half, at, at, options=OPTIONS)
    second = replay.start(engine.store, engine.queue, OWNER, found, at, at, options=OPTIONS)
    rest = replay.start(engine.store, engine.queue, OWNER, found, at, at, options=OPTIONS)
    # Then each original has one replay, sent by the request that inserted it, and all count them all
    assert replays_of(engine, job) == sorted(r.run_id for r in dead)
    assert (len(first.runs), len(second.runs), len(rest.runs)) == (2, 2, 0)
    assert (first.count, second.count, rest.count) == (2, 4, 4)
    moved = engine.store.get_run(job.id, off_schedule(at + replay.STRIDE_MS, 2))
    assert moved.replay_of == dead[2].run_id  # its own instant was taken: a stride later (sent, due then)
    due_now = [r.run_id for r in first.runs + second.runs if r.scheduled_at < at + replay.STRIDE_MS]
    assert sorted(d.run_id for d in drain(engine.queue)) == sorted(due_now)
