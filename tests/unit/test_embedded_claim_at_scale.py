"""What keeps the embedded engine's claim flat at 10M jobs (docs/decisions.md, issue 14): advances
go to the rows the due query found (by rowid, in file order), and checkpoints run on a thread of
their own. Speed is proven by ``punctual bench core``; these tests prove the mechanics are correct.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from punctual import ids
from punctual.clock import ManualClock
from punctual.engines.embedded import EmbeddedEngine
from punctual.engines.embedded import store as embedded_store
from punctual.engines.embedded.checkpoint import Checkpointer, frames_waiting
from punctual.engines.embedded.db import Database
from punctual.model import HttpTarget, Job
from punctual.port import Advance

pytestmark = pytest.mark.unit

NOW = 1_800_000_000_000
SHARDS = 1
MINUTE = 60_000


def make_job(next_run_at: int = NOW) -> Job:
    job_id = ids.new_job_id()
    return Job(
        id=job_id,
        owner="alice",
        name="report",
        schedule="* * * * *",
        target=HttpTarget(url="https://example.com/hook"),
        next_run_at=next_run_at,
        due_shard=ids.shard_of(job_id, SHARDS),
        created_at=NOW,
        updated_at=NOW,
    )


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[EmbeddedEngine]:
    engine = EmbeddedEngine(tmp_path / "punctual.db", shards=SHARDS, clock=ManualClock(NOW))
    yield engine
    engine.close()


def advance(job: Job) -> Advance:
    return Advance(job.id, NOW, NOW + MINUTE, last_run_at=NOW, now=NOW)


def test_advances_go_to_the_rows_found_in_file_order_and_answer_in_request_order(engine: EmbeddedEngine) -> None:
    # Given due jobs (created in one order) and a claim that advances them in another
    jobs = [make_job() for _ in range(20)]
    for job in jobs:
        engine.store.create_job(job)
    due = engine.store.due_jobs(0, NOW, 100)
    assert sorted(d.job_id for d in due) == sorted(j.id for j in jobs)
    statements: list[str] = []
    engine.store._db.connection().set_trace_callback(statements.append)
    # (one advance is stale: its job moved meanwhile)
    stale = jobs[7]
    engine.store.advance_jobs([advance(stale)])
    statements.clear()

    shuffled = jobs[::-1]
    results = engine.store.advance_jobs([advance(job) for job in shuffled])

    # Then each answer is for the advance at its position, and the job moved exactly once
    assert results == [job is not stale for job in shuffled]
    assert all(engine.store.get_job(job.id).next_run_at == NOW + MINUTE for job in jobs)
    assert all(engine.store.get_job(job.id).version == 2 for job in jobs)
    # And the rows were found by the position the due query read (one statement each), in file order
    updates = [s for s in statements if s.startswith("UPDATE jobs")]
    assert len(updates) == len(jobs)  # the stale one used its position already: by id (and it fails)
    rowids = [int(s.rsplit("rowid = ", 1)[1]) for s in updates if "rowid = " in s]
    assert rowids == sorted(rowids) and len(rowids) == len(jobs) - 1


def test_a_stale_position_is_retried_by_id(engine: EmbeddedEngine) -> None:
    # Given a due job read by the claim, then deleted from the file and created again (a new rowid)
    job = make_job()
    engine.store.create_job(job)
    engine.store.due_jobs(0, NOW, 10)
    with engine.store._db.write() as conn:
        conn.execute("DELETE FROM jobs WHERE job_id = ?", (job.id,))
    engine.store.create_job(make_job())  # takes the freed rowid
    engine.store.create_job(job)
    # When the claim advances it, Then the advance still lands (by id) once
    assert engine.store.advance_jobs([advance(job)]) == [True]
    assert engine.store.get_job(job.id).next_run_at == NOW + MINUTE
    assert engine.store.advance_jobs([advance(job)]) == [False]  # the seed's condition still holds


def test_positions_are_bounded_when_due_jobs_are_read_and_never_advanced(
    engine: EmbeddedEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedded_store, "_MAX_POSITIONS", 5)
    for _ in range(4):
        engine.store.create_job(make_job())
    engine.store.due_jobs(0, NOW, 10)
    engine.store.due_jobs(0, NOW, 10)  # 4 + 4 > 5: the first read's are forgotten first
    assert len(engine.store._positions) <= 5


def test_frames_waiting_reads_the_wal_index_header(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE t (x)")
    shm = Path(f"{path}-shm")
    before = frames_waiting(shm)
    conn.execute("BEGIN")
    for _ in range(50):
        conn.execute("INSERT INTO t VALUES (?)", ("x" * 3000,))
    conn.execute("COMMIT")
    waiting = frames_waiting(shm)
    assert before is not None and waiting is not None and waiting >= before + 50
    busy, log, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert (busy, log) == (0, done) and frames_waiting(shm) == 0
    conn.close()
    assert frames_waiting(tmp_path / "missing-shm") is None


def test_the_checkpointer_copies_the_wal_back_once_enough_frames_wait(tmp_path: Path) -> None:
    # Given a database whose checkpointer acts after 20 frames (the writers' own bound is far higher)
    db = Database(tmp_path / "p.db", shards=1)
    db._checkpointer = Checkpointer(db.path, interval_s=0.01, pages=20)
    shm = Path(f"{db.path}-shm")
    try:
        # When a write leaves more frames than that in the WAL
        with db.write() as conn:
            conn.execute("CREATE TABLE filler (x)")
            for _ in range(40):
                conn.execute("INSERT INTO filler VALUES (?)", ("x" * 3000,))
        assert (frames_waiting(shm) or 0) >= 40 or db._checkpointer.checkpoints > 0
        # Then the thread copies them back (bounded wait)
        deadline = time.monotonic() + 10
        while frames_waiting(shm) != 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert frames_waiting(shm) == 0 and db._checkpointer.checkpoints >= 1
    finally:
        db.close()
    # And close stops the thread
    assert not [t for t in threading.enumerate() if t.name == f"punctual-checkpoint-{db.path.name}"]


def test_a_process_that_only_reads_starts_no_checkpointer(tmp_path: Path) -> None:
    db = Database(tmp_path / "r.db", shards=1)
    try:
        db.connection().execute("SELECT 1").fetchall()
        assert not [t for t in threading.enumerate() if t.name == f"punctual-checkpoint-{db.path.name}"]
    finally:
        db.close()
