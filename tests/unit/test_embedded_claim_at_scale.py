"""What keeps the embedded engine's claim flat at 10M jobs (docs/decisions/0098, 0099, 0106): advances
go to the rows the due query found (by rowid, in file order), and checkpoints run on a thread of
their own. Speed is proven by ``punctual bench core``; these tests prove the mechanics are correct.
"""

from __future__ import annotations

import io
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from punctual import ids
from punctual.clock import ManualClock
from punctual.engines.embedded import EmbeddedEngine
from punctual.engines.embedded import store as embedded_store
from punctual.engines.embedded.checkpoint import Checkpointer
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


def _frames_waiting(path: Path) -> int:
    """Frames in the WAL not yet copied back, asked of SQLite (a read-only connection's PASSIVE
    checkpoint copies nothing: it reports)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    try:
        conn.execute("PRAGMA busy_timeout = 1000")
        _busy, log, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return max(0, log - copied)
    finally:
        conn.close()


def test_the_checkpointer_copies_the_wal_back(tmp_path: Path) -> None:
    # Given a database whose checkpointer copies after 10 ms without a commit (the writers' own bound is far higher)
    db = Database(tmp_path / "p.db", shards=1)
    db._checkpointer = Checkpointer(db.path, quiet_s=0.01)
    try:
        # When a write leaves frames in the WAL
        with db.write() as conn:
            conn.execute("CREATE TABLE filler (x)")
            for _ in range(40):
                conn.execute("INSERT INTO filler VALUES (?)", ("x" * 3000,))
        # Then the thread copies them back (bounded wait)
        assert _within_10_s(lambda: db._checkpointer.checkpoints >= 1)
    finally:
        db.close()
    assert _frames_waiting(db.path) == 0
    # And close stops the thread
    assert not [t for t in threading.enumerate() if t.name == f"punctual-checkpoint-{db.path.name}"]


def test_an_idle_checkpointer_sleeps_until_the_next_commit(tmp_path: Path) -> None:
    # Given a checkpointer that copied everything (it used to look every 10 ms here, forever)
    db = Database(tmp_path / "p.db", shards=1)
    checkpointer = db._checkpointer = Checkpointer(db.path, quiet_s=0.01)
    looks: list[float] = []
    due = checkpointer.due
    checkpointer.due = lambda now: looks.append(now) or due(now)  # type: ignore[method-assign]
    try:
        with db.write() as conn:
            conn.execute("CREATE TABLE filler (x)")
        assert _within_10_s(lambda: checkpointer.checkpoints >= 1 and checkpointer._dirty_since is None)
        # When nothing is written for half a second
        before = len(looks)
        time.sleep(0.5)
        # Then it did not look once (it waits for a commit, not on a timer)
        assert len(looks) - before <= 1
        # And the next commit wakes it and is copied
        with db.write() as conn:
            conn.execute("INSERT INTO filler VALUES ('x')")
        assert _within_10_s(lambda: checkpointer.checkpoints >= 2)
    finally:
        db.close()
    assert not [t for t in threading.enumerate() if t.name == f"punctual-checkpoint-{db.path.name}"]


def test_the_checkpointer_waits_for_a_pause_in_writes_or_for_its_longest_wait(tmp_path: Path) -> None:
    # A claim burst's commits follow each other within milliseconds: its pages are copied in the
    # pause after it, not while it runs; a stream that never pauses is still copied after max_wait_s.
    checkpointer = Checkpointer(tmp_path / "c.db", quiet_s=0.25, max_wait_s=2.0)
    assert not checkpointer.due(time.monotonic() + 100)  # nothing written: nothing to copy
    checkpointer.wrote()
    first = time.monotonic()
    assert not checkpointer.due(first + 0.1)  # writes just happened
    assert checkpointer.due(first + 0.3)  # a pause

    # Given commits every 0.1 s (never a pause of quiet_s)
    stream = Checkpointer(tmp_path / "s.db", quiet_s=0.25, max_wait_s=2.0)
    stream._last_write, stream._dirty_since = first, first  # the first commit of the stream at `first`
    for step in range(1, 20):
        stream._last_write = first + step * 0.1
        assert not stream.due(first + step * 0.1 + 0.05)
    stream._last_write = first + 2.0
    assert stream.due(first + 2.05)  # the oldest commit not copied is 2 s old


def test_a_pass_that_left_frames_behind_is_tried_again_without_a_new_commit(tmp_path: Path) -> None:
    # Given a reader that holds an old snapshot while the thread copies (PASSIVE copies only the
    # frames no reader still needs)
    db = Database(tmp_path / "k.db", shards=1)
    db._checkpointer = Checkpointer(db.path, quiet_s=0.01)
    reader = sqlite3.connect(db.path, isolation_level=None)
    try:
        with db.write() as conn:
            conn.execute("CREATE TABLE filler (x)")
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM filler").fetchone()  # the snapshot is taken here
        with db.write() as conn:
            for _ in range(20):
                conn.execute("INSERT INTO filler VALUES (?)", ("x" * 3000,))
        assert _within_10_s(lambda: db._checkpointer._not_before > 0.0)  # a pass saw frames it could not copy
        passes = db._checkpointer.checkpoints
        # When the reader lets go, and nothing else is committed
        reader.execute("COMMIT")
        # Then a later pass copies the rest (bounded wait)
        assert _within_10_s(lambda: db._checkpointer.checkpoints > passes)
        assert db._checkpointer._dirty_since is None  # complete: nothing left to try again
    finally:
        reader.close()
        db.close()


def test_the_checkpointer_never_opens_sqlites_own_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Closing a handle on the -shm or -wal file drops every POSIX lock the process holds on it, and
    # other processes then reset the WAL under this one's readers: a corrupt database (an earlier
    # checkpointer read the WAL-index header from the -shm file; a 20k-run burst hit "database disk
    # image is malformed"). Any open of those files from Python while the thread works fails here.
    opened: list[str] = []
    real_open = io.open

    def guarded_open(file: object, *args: object, **kwargs: object) -> object:
        if str(file).endswith(("-shm", "-wal")):
            opened.append(str(file))
        return real_open(file, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(io, "open", guarded_open)
    monkeypatch.setattr("builtins.open", guarded_open)
    monkeypatch.setattr(os, "open", _guard_os_open(os.open, opened))
    db = Database(tmp_path / "g.db", shards=1)
    db._checkpointer = Checkpointer(db.path, quiet_s=0.01)
    try:
        with db.write() as conn:
            conn.execute("CREATE TABLE filler (x)")
            conn.execute("INSERT INTO filler VALUES (?)", ("x" * 3000,))
        assert _within_10_s(lambda: db._checkpointer.checkpoints >= 1)
    finally:
        db.close()
    assert opened == []


def _within_10_s(condition: Callable[[], bool]) -> bool:
    """Whether ``condition`` holds within 10 s (polled; bounded, as every wait of these tests)."""
    deadline = time.monotonic() + 10
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def _guard_os_open(real: Any, opened: list[str]) -> Any:
    def guarded(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path).endswith(("-shm", "-wal")):
            opened.append(str(path))
        return real(path, *args, **kwargs)

    return guarded


def test_checkpoint_copies_the_wal_back_and_empties_it(tmp_path: Path) -> None:
    db = Database(tmp_path / "t.db", shards=1)
    try:
        with db.write() as conn:
            conn.execute("CREATE TABLE filler (x)")
            for _ in range(40):
                conn.execute("INSERT INTO filler VALUES (?)", ("x" * 3000,))
        wal = f"{db.path}-wal"
        assert os.path.getsize(wal) > 40 * 3000  # the pages are in the WAL (a stat, not an open)
        assert db.checkpoint()
        assert os.path.getsize(wal) == 0  # copied back, and the WAL emptied (TRUNCATE)
        assert db.connection().execute("SELECT count(*) FROM filler").fetchone()[0] == 40
    finally:
        db.close()


def test_a_process_that_only_reads_starts_no_checkpointer(tmp_path: Path) -> None:
    db = Database(tmp_path / "r.db", shards=1)
    try:
        db.connection().execute("SELECT 1").fetchall()
        assert not [t for t in threading.enumerate() if t.name == f"punctual-checkpoint-{db.path.name}"]
    finally:
        db.close()
