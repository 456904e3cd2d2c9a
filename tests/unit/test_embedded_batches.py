"""The embedded engine's batched finish and message delete past one SQL statement's chunk: every
run and every message decided as the per-run rules decide it, whichever chunk it falls in.
(The cross-engine behaviour is in tests/contract/test_batch_writes.py and test_batches.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from punctual import ids, rules
from punctual.clock import ManualClock
from punctual.engines.embedded import EmbeddedEngine
from punctual.model import Attempt, AttemptOutcome, Run, RunState, copy_run
from punctual.port import Dispatch, Finish, Hold, LeaseOutcome, LeaseRequest, RunChange

pytestmark = pytest.mark.unit

NOW = 1_800_000_000_000
LEASE = 30_000
MANY = 1_100  # more than two statements' worth of finishes (400) and of receipts (500)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def engine(tmp_path: Path, clock: ManualClock) -> Iterator[EmbeddedEngine]:
    engine = EmbeddedEngine(tmp_path / "punctual.db", shards=4, clock=clock)
    yield engine
    engine.close()


def received(engine: EmbeddedEngine, count: int, visibility_s: int = 60) -> list:
    got: list = []
    for _ in range(count):
        batch = engine.queue.receive(1_000, visibility_s)
        if not batch:
            return got
        got.extend(batch)
    return got


def test_delete_many_deletes_every_chunk_and_skips_stale_receipts(engine: EmbeddedEngine) -> None:
    # Given many received messages, three of which were received again since (their first receipts are stale)
    engine.queue.send([Dispatch(f"run_{i}", NOW) for i in range(MANY)])
    first = received(engine, MANY)
    assert len(first) == MANY
    engine.queue.extend_many([d.receipt for d in first[-3:]], 0)
    again = received(engine, 10)
    assert sorted(d.run_id for d in again) == sorted(d.run_id for d in first[-3:])
    # When every first receipt is deleted in one call, with one that is no receipt at all
    engine.queue.delete_many([*(d.receipt for d in first), "not-a-receipt"])
    # Then every message went but the three received again, which the newer receipts delete
    assert engine.queue.depth() == 3
    engine.queue.delete_many([d.receipt for d in again])
    assert engine.queue.depth() == 0


def test_finish_and_ack_of_many_leased_runs_refuses_only_the_lost_lease(
    engine: EmbeddedEngine, clock: ManualClock
) -> None:
    # Given many runs leased by w1 with their messages, one of them (in a later chunk) taken over by w2 since
    job_id = ids.new_job_id()
    runs = [
        Run(job_id=job_id, scheduled_at=NOW - i, owner="alice", deadline_at=NOW, created_at=NOW) for i in range(MANY)
    ]
    assert all(engine.store.insert_runs(runs))
    engine.queue.send([Dispatch(r.run_id, r.scheduled_at) for r in runs])
    receipts = {d.run_id: d.receipt for d in received(engine, MANY)}
    leases = engine.store.lease_runs([LeaseRequest(job_id, r.scheduled_at, LEASE) for r in runs], "w1", NOW)
    leased = [lease.run for lease in leases if lease.outcome is LeaseOutcome.LEASED and lease.run is not None]
    assert len(leased) == MANY
    lost = leased[900]
    clock.advance(LEASE + 1)
    [takeover] = engine.store.lease_runs([LeaseRequest(job_id, lost.scheduled_at, LEASE)], "w2", clock.now_ms())
    assert takeover.outcome is LeaseOutcome.LEASED
    rows = {r.scheduled_at: engine.store.get_run(job_id, r.scheduled_at) for r in leased}
    # When w1 finishes and acknowledges them all, with the runs as its leases returned them
    at = clock.now_ms()
    record = Attempt(number=1, worker_id="w1", started_at=NOW, finished_at=at, outcome=AttemptOutcome.SUCCEEDED)
    change = RunChange(RunState.SUCCEEDED, at, at, append=record, finished_at=at)
    finishes = [Finish(Hold(job_id, r.scheduled_at, "w1", 1), change, receipts[r.run_id], r) for r in leased]
    results = engine.finish_and_ack(finishes)
    # Then every run but the lost one is finished as the rules say, and only its message is left
    for run, result in zip(leased, results, strict=True):
        if run is lost:
            assert result is None
        else:
            assert (
                result
                == rules.apply_change(rows[run.scheduled_at], change)
                == engine.store.get_run(job_id, run.scheduled_at)
            )
    assert engine.store.get_run(job_id, lost.scheduled_at) == takeover.run
    assert engine.queue.depth() == 1


def test_copy_run_is_model_copy() -> None:
    run = Run(job_id=ids.new_job_id(), scheduled_at=NOW, owner="alice", deadline_at=NOW, created_at=NOW, note="kept")
    update = {"state": RunState.RUNNING, "attempt": 1, "worker_id": "w1", "attempts": []}
    copied, reference = copy_run(run, update), run.model_copy(update=update)
    assert copied == reference and copied.model_dump_json() == reference.model_dump_json()
    assert copied.model_fields_set == reference.model_fields_set
    assert copied.__pydantic_extra__ == reference.__pydantic_extra__ and copied.__pydantic_private__ is None
    assert run.state is RunState.SCHEDULED and run.worker_id is None  # the original is untouched
    copied.note = "changed"
    assert run.note == "kept"


def test_a_batched_lease_writes_what_rules_leased_writes_whatever_the_document_holds(engine: EmbeddedEngine) -> None:
    # Given scheduled runs whose documents hold a started_at or not, with text that looks like the
    # "never started" marker inside a note, and an attempt record without a start
    job_id = ids.new_job_id()
    marker = '"lease_expires_at":null,"started_at":null,'
    record = Attempt(number=1, worker_id=None, started_at=None, outcome=AttemptOutcome.LEASE_EXPIRED)
    base = {"job_id": job_id, "owner": "alice", "deadline_at": NOW, "created_at": NOW}
    runs = [
        Run(**base, scheduled_at=NOW - 1),
        Run(**base, scheduled_at=NOW - 2, started_at=NOW - 500),
        Run(**base, scheduled_at=NOW - 3, started_at=NOW - 600, note=marker),
        Run(**base, scheduled_at=NOW - 4, started_at=NOW - 700, attempt=1, attempts=[record]),
        Run(**base, scheduled_at=NOW - 5, note=marker, attempts=[record]),
        Run(**base, scheduled_at=NOW - 6, lease_expires_at=NOW - 800),
    ]
    assert all(engine.store.insert_runs(runs))
    # When they are leased in one batch
    requests = [LeaseRequest(job_id, r.scheduled_at, LEASE) for r in runs]
    leases = engine.store.lease_runs(requests, "w1", NOW)
    # Then each is the run rules.leased gives, as read back
    for run, lease in zip(runs, leases, strict=True):
        expected = rules.leased(run, "w1", NOW, LEASE)
        assert lease.outcome is LeaseOutcome.LEASED
        assert lease.run == expected == engine.store.get_run(job_id, run.scheduled_at)
