"""Engine-specific tests of the embedded (SQLite) engine: what the cross-engine contract suite
cannot show. Durability across ``kill -9``, two processes claiming one shard, the queue's
SQS-like mechanics on a ManualClock, the query plans that keep the claim flat, and the file's
configuration guards. General port behaviour lives in ``tests/contract``.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from punctual import ids
from punctual.clock import ManualClock, SystemClock
from punctual.config import Settings
from punctual.engines.embedded import EmbeddedEngine, queue, schema, stats, store
from punctual.engines.embedded.db import Database
from punctual.errors import ConfigError
from punctual.model import HttpTarget, Job, JobStatus, Run
from punctual.port import Advance, Dispatch, LeaseOutcome
from punctual.resources import DISPATCH_QUEUE

pytestmark = pytest.mark.unit

NOW = 1_800_000_000_000
SHARDS = 4
CHILD_TIMEOUT_S = 20

# -- helpers ------------------------------------------------------------------------------------


def make_job(shards: int = SHARDS, *, next_run_at: int = NOW, owner: str = "alice") -> Job:
    job_id = ids.new_job_id()
    return Job(
        id=job_id,
        owner=owner,
        name="report",
        schedule="* * * * *",
        payload={"n": 1},
        target=HttpTarget(url="https://example.com/hook"),
        next_run_at=next_run_at,
        due_shard=ids.shard_of(job_id, shards),
        created_at=NOW,
        updated_at=NOW,
    )


def make_run(job_id: str, scheduled_at: int, owner: str = "alice") -> Run:
    return Run(job_id=job_id, scheduled_at=scheduled_at, owner=owner, deadline_at=scheduled_at + 60_000, created_at=NOW)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def engine(tmp_path: Path, clock: ManualClock) -> Iterator[EmbeddedEngine]:
    engine = EmbeddedEngine(tmp_path / "punctual.db", shards=SHARDS, clock=clock, max_receives=3)
    yield engine
    engine.close()


def run_child(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# -- store: rows, plans, configuration -----------------------------------------------------------


def test_smoke_claim_cycle_keeps_job_columns_and_doc_consistent(engine: EmbeddedEngine) -> None:
    # Given an active job
    job = make_job()
    engine.store.create_job(job)
    # When it is claimed twice (a recurring advance, then a completing one)
    (due,) = engine.store.due_jobs(job.due_shard, NOW, 10)
    assert engine.store.insert_runs([make_run(job.id, NOW), make_run(job.id, NOW)]) == [True, False]
    assert engine.store.advance_jobs([Advance(job.id, NOW, NOW + 60_000, NOW, NOW + 5)]) == [True]
    assert engine.store.advance_jobs([Advance(job.id, NOW, NOW + 60_000, NOW, NOW + 5)]) == [False]  # stale
    assert engine.store.advance_jobs([Advance(job.id, NOW + 60_000, None, NOW + 60_000, NOW + 7)]) == [True]
    # Then the job read back merges the claim's columns into the stored document
    stored = engine.store.get_job(job.id)
    assert (stored.status, stored.next_run_at, stored.last_run_at) == (JobStatus.COMPLETED, None, NOW + 60_000)
    assert (stored.version, stored.updated_at, stored.payload) == (3, NOW + 7, {"n": 1})
    assert due.job_id == job.id and due.next_run_at == NOW
    assert engine.store.due_jobs(job.due_shard, NOW + 10**9, 10) == []
    # and an update with the merged version succeeds
    updated = engine.store.update_job(stored.model_copy(update={"name": "renamed"}), expected_version=3)
    assert engine.store.get_job(job.id) == updated


@pytest.mark.parametrize(
    ("column", "value"),
    [("status", "sleeping"), ("status", 'active","owner":"mallory'), ("version", "seven"), ("next_run_at", 1.5)],
)
def test_a_job_row_whose_state_columns_are_not_what_the_store_writes_is_refused(
    engine: EmbeddedEngine, column: str, value: object
) -> None:
    # Given a job whose state column was changed behind the store's back (a status word it does
    # not know, text that tries to end the document early, text or a real where an integer belongs)
    job = make_job()
    engine.store.create_job(job)
    with engine._db.write() as conn:
        conn.execute(f"UPDATE jobs SET {column} = ? WHERE job_id = ?", (value, job.id))
    # Then neither the single read nor the worker's batch read makes a job of it
    with pytest.raises(ValueError, match=column):
        engine.store.get_job(job.id)
    with pytest.raises(ValueError, match=column):
        engine.store.get_jobs([job.id])


def test_due_and_reaper_queries_use_their_partial_indexes(engine: EmbeddedEngine) -> None:
    # The claim must cost the same at 10k and 1M jobs: one range scan of the covering due index.
    conn = engine._db.connection()

    def plan(sql: str, params: tuple[object, ...]) -> str:
        return " ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))

    assert "COVERING INDEX jobs_due" in plan(store._DUE_FIRST, (0, NOW, 10))
    assert "COVERING INDEX jobs_due" in plan(store._DUE_AFTER, (0, NOW, 10, NOW, "job_x"))
    assert "INDEX runs_open (deadline_at<?)" in plan(store._PAST_DEADLINE, (NOW, NOW, 10))
    # Retention and stats read their terminal runs through their partial indexes too
    assert "INDEX runs_expired" in plan(store._PURGE_RUNS, (NOW // 1000, 10))
    assert "INDEX runs_stats (owner=?" in plan(stats._AGGREGATE, ("alice", NOW, NOW + 60_000))
    # The idle poll's reads seek each owner's messages (v8 dropped the queue's second visibility index)
    for sql, params in ((queue._ANY_VISIBLE, ("dispatch", NOW)), (queue._NEXT_VISIBLE, ("dispatch",))):
        assert "SCAN queue" not in plan(sql, params) and "queue_group_visible (queue=? AND grp=?" in plan(sql, params)


def test_a_v6_file_gets_the_run_indexes_spelled_without_in_lists(tmp_path: Path) -> None:
    # Given a file as version 6 left it (partial indexes on runs with "state IN (...)")
    with sqlite3.connect(tmp_path / "p.db") as conn:
        for step in schema.MIGRATIONS[:6]:
            for statement in step:
                conn.execute(statement)
        conn.execute("INSERT INTO meta (key, value) VALUES ('shards', '1')")
        conn.execute("PRAGMA user_version = 6")
    # When it is opened
    Database(tmp_path / "p.db", shards=1).close()
    # Then every index is the current one: no IN list left (each cost an ephemeral table per update)
    with sqlite3.connect(tmp_path / "p.db") as conn:
        indexes = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"))
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
    assert indexes == schema.current_indexes()
    assert not any(" IN (" in sql for name, sql in indexes.items() if name.startswith("runs_"))


def test_file_is_wal_and_refuses_another_shard_count(tmp_path: Path, clock: ManualClock) -> None:
    engine = EmbeddedEngine(tmp_path / "p.db", shards=SHARDS, clock=clock)
    assert engine._db.connection().execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    engine.close()
    with pytest.raises(ConfigError, match="created with 4 due shards"):
        EmbeddedEngine(tmp_path / "p.db", shards=8, clock=clock)


def test_refuses_a_file_from_a_newer_schema(tmp_path: Path) -> None:
    Database(tmp_path / "p.db", shards=1).close()
    with sqlite3.connect(tmp_path / "p.db") as conn:
        conn.execute("PRAGMA user_version = 999")
    with pytest.raises(ConfigError, match="newer"):
        Database(tmp_path / "p.db", shards=1)


def test_from_settings_creates_the_data_dir(tmp_path: Path, clock: ManualClock) -> None:
    settings = Settings(data_dir=str(tmp_path / "nested" / "dir"), shards=2)
    engine = EmbeddedEngine.from_settings(settings, clock=clock)
    try:
        assert engine.path == tmp_path / "nested" / "dir" / "punctual.db" and engine.path.exists()
        assert engine.store.shards == 2
    finally:
        engine.close()


def test_threads_racing_for_one_run_lease_it_once(engine: EmbeddedEngine) -> None:
    job = make_job()
    engine.store.insert_runs([make_run(job.id, NOW)])
    outcomes: list[LeaseOutcome] = []
    barrier = threading.Barrier(4)

    def worker(name: str) -> None:
        barrier.wait()
        outcomes.append(engine.store.lease_run(job.id, NOW, name, NOW, 30_000).outcome)

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(CHILD_TIMEOUT_S)
    assert sorted(outcomes) == sorted([LeaseOutcome.LEASED] + [LeaseOutcome.HELD] * 3)


# -- processes: durability and concurrent claims ----------------------------------------------------

_COMMIT_THEN_HANG = """
import sys, time
from punctual.clock import ManualClock
from punctual.engines.embedded import EmbeddedEngine
from punctual.model import Run
from punctual.port import Advance, Dispatch
path, job_id, now = sys.argv[1], sys.argv[2], int(sys.argv[3])
engine = EmbeddedEngine(path, shards=4, clock=ManualClock(now))
run = Run(job_id=job_id, scheduled_at=now, owner="alice", deadline_at=now + 60_000, created_at=now)
assert engine.store.insert_runs([run]) == [True]
engine.queue.send([Dispatch(run.run_id, now)])
assert engine.store.advance_jobs([Advance(job_id, now, now + 60_000, now, now)]) == [True]
print("committed", flush=True)
time.sleep(60)
"""


def test_committed_claim_survives_kill_9(tmp_path: Path, clock: ManualClock) -> None:
    # Given a job, and a child process that commits a claim and then hangs
    path = tmp_path / "punctual.db"
    setup = EmbeddedEngine(path, shards=SHARDS, clock=clock)
    job = make_job()
    setup.store.create_job(job)
    setup.close()
    child = run_child(_COMMIT_THEN_HANG, str(path), job.id, str(NOW))
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "committed", child.stderr.read() if child.stderr else ""
        # the claim is still in the WAL only: the child never checkpointed or closed the file
        assert Path(f"{path}-wal").stat().st_size > 0
    finally:
        # When the child is killed without any chance to clean up
        os.kill(child.pid, signal.SIGKILL)
        child.wait(CHILD_TIMEOUT_S)
    assert child.returncode == -signal.SIGKILL
    # Then a fresh open recovers the committed run, its message and the advanced job
    engine = EmbeddedEngine(path, shards=SHARDS, clock=clock)
    try:
        assert engine.store.get_run(job.id, NOW).job_id == job.id
        assert [d.run_id for d in engine.queue.receive(10, 30)] == [ids.run_id_for(job.id, NOW)]
        stored = engine.store.get_job(job.id)
        assert (stored.next_run_at, stored.last_run_at, stored.version) == (NOW + 60_000, NOW, 2)
    finally:
        engine.close()


_CLAIMER = """
import json, sys
from punctual.clock import ManualClock
from punctual.engines.embedded import EmbeddedEngine
from punctual.model import Run
from punctual.port import Advance
path, until, step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
engine = EmbeddedEngine(path, shards=1, clock=ManualClock(until))
print("ready", flush=True)
sys.stdin.readline()  # start together
mine = []
for _ in range(10_000):  # bounded: the jobs run out long before
    due = engine.store.due_jobs(0, until, 7)
    if not due:
        break
    runs = [Run(job_id=d.job_id, scheduled_at=d.next_run_at, owner=d.owner, deadline_at=until, created_at=until)
            for d in due]
    flags = engine.store.insert_runs(runs)
    mine += [[r.job_id, r.scheduled_at] for r, ok in zip(runs, flags) if ok]
    nexts = [d.next_run_at + step if d.next_run_at + step <= until else None for d in due]
    engine.store.advance_jobs([Advance(d.job_id, d.next_run_at, n, d.next_run_at, until) for d, n in zip(due, nexts)])
print(json.dumps(mine))
"""


def test_two_processes_claiming_one_shard_claim_every_due_time_once(tmp_path: Path, clock: ManualClock) -> None:
    # Given 200 jobs in one shard, each due 5 times (every second for 5 s)
    path, step, times = tmp_path / "punctual.db", 1_000, 5
    setup = EmbeddedEngine(path, shards=1, clock=clock)
    jobs = [make_job(1) for _ in range(200)]
    setup.store.bulk_load_jobs(jobs)
    until = NOW + (times - 1) * step
    # When two processes claim the shard at the same time
    children = [run_child(_CLAIMER, str(path), str(until), str(step)) for _ in range(2)]
    for child in children:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    claimed: list[set[tuple[str, int]]] = []
    for child in children:
        out, err = child.communicate(timeout=CHILD_TIMEOUT_S)
        assert child.returncode == 0, err
        claimed.append({(job_id, at) for job_id, at in json.loads(out)})
    # Then both took part, no run was inserted by both, and every due time was claimed exactly once
    assert claimed[0] and claimed[1]
    assert not claimed[0] & claimed[1]
    expected = {(job.id, NOW + k * step) for job in jobs for k in range(times)}
    assert claimed[0] | claimed[1] == expected
    stored = setup._db.connection().execute("SELECT count(*) FROM runs").fetchone()[0]
    assert stored == len(expected)
    assert all(setup.store.get_job(job.id).status is JobStatus.COMPLETED for job in jobs)
    setup.close()


# -- queue -----------------------------------------------------------------------------------------


def test_delay_hides_a_message_until_its_second(engine: EmbeddedEngine, clock: ManualClock) -> None:
    engine.queue.send([Dispatch("run_a", NOW + 2_000, delay_s=2)])
    assert engine.queue.receive(10, 30) == []
    clock.advance(1_999)
    assert engine.queue.receive(10, 30) == []
    clock.advance(1)
    (delivery,) = engine.queue.receive(10, 30)
    assert (delivery.run_id, delivery.not_before, delivery.receive_count) == ("run_a", NOW + 2_000, 1)


def test_delay_beyond_the_sqs_maximum_is_refused(engine: EmbeddedEngine) -> None:
    with pytest.raises(ValueError, match="delay_s"):
        engine.queue.send([Dispatch("run_a", NOW, delay_s=0), Dispatch("run_b", NOW, delay_s=901)])
    assert engine.queue.depth() == 0  # all or nothing


def test_visibility_redelivers_with_a_new_receipt_and_a_higher_count(
    engine: EmbeddedEngine, clock: ManualClock
) -> None:
    engine.queue.send([Dispatch("run_a", NOW)])
    (first,) = engine.queue.receive(10, 5)
    clock.advance(4_999)
    assert engine.queue.receive(10, 5) == []
    clock.advance(1)
    (second,) = engine.queue.receive(10, 5)
    assert second.receive_count == 2 and second.receipt != first.receipt


def test_stale_receipt_neither_extends_nor_deletes_the_newer_delivery(
    engine: EmbeddedEngine, clock: ManualClock
) -> None:
    engine.queue.send([Dispatch("run_a", NOW)])
    (first,) = engine.queue.receive(1, 5)
    clock.advance(5_000)
    (second,) = engine.queue.receive(1, 5)
    engine.queue.delete(first.receipt)
    engine.queue.extend(first.receipt, 0)
    engine.queue.delete("not-a-receipt")
    assert engine.queue.depth() == 1
    assert engine.queue.receive(1, 5) == []  # still hidden by the second delivery
    engine.queue.extend(second.receipt, 0)
    (third,) = engine.queue.receive(1, 5)
    engine.queue.delete(third.receipt)
    assert engine.queue.depth() == 0


def test_zero_visibility_delivers_each_message_once_per_receive(engine: EmbeddedEngine) -> None:
    engine.queue.send([Dispatch("run_a", NOW), Dispatch("run_b", NOW)])
    deliveries = engine.queue.receive(10, 0)
    assert sorted(d.run_id for d in deliveries) == ["run_a", "run_b"]


def test_a_body_reads_the_same_by_its_fast_path_and_by_json(engine: EmbeddedEngine) -> None:
    # Given bodies as the queue writes them (a run id: read by a regular expression; any other
    # text: by json.loads) and one written by hand in another key order
    run_id = ids.run_id_for(ids.new_job_id(), NOW)
    engine.queue.send([Dispatch(run_id, NOW), Dispatch(run_id, -7), Dispatch("run_a", 0), Dispatch('run_"é"', NOW)])
    with engine._db.write() as conn:
        conn.execute(
            "INSERT INTO queue (queue, body, visible_at, sent_at) VALUES (?, ?, 0, ?)",
            (engine.queue.name, json.dumps({"not_before": 5, "run_id": run_id}), NOW),
        )
    # When they are received
    deliveries = engine.queue.receive(10, 30)
    # Then each gives back what was sent, with a receipt naming its message
    got = sorted((d.run_id, d.not_before) for d in deliveries)
    assert got == sorted([(run_id, NOW), (run_id, -7), ("run_a", 0), ('run_"é"', NOW), (run_id, 5)])
    assert all(d.receipt == f"{d.extra['message_id']}.{d.receipt.split('.')[1]}" for d in deliveries)
    assert len({d.receipt.split(".")[1] for d in deliveries}) == 1  # one token per receive
    engine.queue.delete_many([d.receipt for d in deliveries])
    assert engine.queue.depth() == 0


def test_a_body_that_is_not_json_fails_the_receive_and_changes_nothing(engine: EmbeddedEngine) -> None:
    with engine._db.write() as conn:
        conn.execute(
            "INSERT INTO queue (queue, body, visible_at, sent_at) VALUES (?, 'not json', 0, ?)",
            (engine.queue.name, NOW),
        )
    with pytest.raises(ValueError):
        engine.queue.receive(10, 30)
    assert engine._db.connection().execute("SELECT receive_count FROM queue").fetchall() == [(0,)]


def test_message_moves_to_the_dead_letter_queue_after_max_receives(engine: EmbeddedEngine, clock: ManualClock) -> None:
    # Given a message received max_receives (3) times and never deleted
    engine.queue.send([Dispatch("run_poison", NOW)])
    for count in (1, 2, 3):
        (delivery,) = engine.queue.receive(1, 1)
        assert delivery.receive_count == count
        clock.advance(1_000)
    # When it becomes visible again, it is dead-lettered instead of delivered
    assert engine.queue.receive(10, 1) == []
    assert (engine.queue.depth(), engine.dead_letters.depth()) == (0, 1)
    # Then the dead-letter queue delivers it from a fresh count, and never dead-letters further
    for count in range(1, 6):
        (dead,) = engine.dead_letters.receive(1, 1)
        assert (dead.run_id, dead.receive_count) == ("run_poison", count)
        clock.advance(1_000)
    engine.dead_letters.delete(engine.dead_letters.receive(1, 1)[0].receipt)
    assert engine.dead_letters.depth() == 0


def test_long_poll_on_a_manual_clock_wakes_when_the_message_turns_visible(
    engine: EmbeddedEngine, clock: ManualClock
) -> None:
    engine.queue.send([Dispatch("run_a", NOW + 1_000, delay_s=1)])
    (delivery,) = engine.queue.receive(1, 30, wait_s=20)
    assert delivery.run_id == "run_a"
    assert NOW + 1_000 <= clock.now_ms() <= NOW + 1_050
    started = clock.now_ms()
    assert engine.queue.receive(1, 30, wait_s=2) == []  # empty: waits out wait_s, no longer
    assert 2_000 <= clock.now_ms() - started <= 2_100


def test_long_poll_returns_as_soon_as_another_thread_sends(tmp_path: Path) -> None:
    engine = EmbeddedEngine(tmp_path / "punctual.db", shards=1, clock=SystemClock())
    sender = threading.Timer(0.2, lambda: engine.queue.send([Dispatch("run_late", 0)]))
    try:
        started = time.monotonic()
        sender.start()
        deliveries = engine.queue.receive(1, 30, wait_s=10)
        assert [d.run_id for d in deliveries] == ["run_late"]
        assert time.monotonic() - started < 2
    finally:
        sender.cancel()
        engine.close()


def test_message_past_its_retention_is_dropped_not_delivered(engine: EmbeddedEngine, clock: ManualClock) -> None:
    # SQS drops a message after the queue's retention period (resources.DISPATCH_QUEUE: 14 days)
    engine.queue.send([Dispatch("run_old", NOW)])
    clock.advance(DISPATCH_QUEUE.retention_s * 1000 + 1)
    assert engine.queue.receive(10, 30) == []
    assert engine.queue.depth() == 0
