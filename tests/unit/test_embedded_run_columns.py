"""Schema v9: a run's started_at, finished_at and expires_at are columns (the run indexes sort by
them), and every write keeps each column equal to its document's field."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from punctual import ids
from punctual.clock import ManualClock
from punctual.engines.embedded import EmbeddedEngine, schema
from punctual.engines.embedded.db import Database
from punctual.model import Attempt, AttemptOutcome, HttpTarget, Job, Run, RunState
from punctual.port import Beat, Finish, Hold, LeaseRequest, RunChange

pytestmark = pytest.mark.unit

NOW = 1_800_000_000_000
LEASE = 30_000
EXPIRES = NOW // 1000 + 86_400

# rows whose columns say something else than their documents
_DRIFT = (
    "SELECT job_id, scheduled_at FROM runs WHERE started_at IS NOT json_extract(doc, '$.started_at')"
    " OR finished_at IS NOT json_extract(doc, '$.finished_at') OR expires_at IS NOT json_extract(doc, '$.expires_at')"
)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[EmbeddedEngine]:
    engine = EmbeddedEngine(tmp_path / "p.db", shards=1, clock=ManualClock(NOW))
    yield engine
    engine.close()


def _job(engine: EmbeddedEngine) -> Job:
    job = Job(
        id=ids.new_job_id(), owner="alice", name="report", schedule="* * * * *",
        target=HttpTarget(url="https://example.com/hook"), next_run_at=NOW, created_at=NOW, updated_at=NOW,
    )  # fmt: skip
    engine.store.create_job(job)
    return job


def _run(job: Job, scheduled_at: int, **fields: object) -> Run:
    return Run(
        job_id=job.id, scheduled_at=scheduled_at, owner=job.owner, deadline_at=scheduled_at + 60_000,
        created_at=NOW, expires_at=EXPIRES, **fields,
    )  # fmt: skip


def _columns(engine: EmbeddedEngine, run: Run) -> tuple[int | None, int | None, int | None]:
    conn = engine.store._db.connection()  # type: ignore[attr-defined]
    sql = "SELECT started_at, finished_at, expires_at FROM runs WHERE job_id = ? AND scheduled_at = ?"
    return tuple(conn.execute(sql, (run.job_id, run.scheduled_at)).fetchone())  # type: ignore[return-value]


def _no_drift(engine: EmbeddedEngine) -> None:
    conn = engine.store._db.connection()  # type: ignore[attr-defined]
    assert conn.execute(_DRIFT).fetchall() == []


def _succeeded(run: Run, at: int) -> RunChange:
    record = Attempt(number=run.attempt, worker_id=run.worker_id, started_at=run.started_at, finished_at=at,
                     outcome=AttemptOutcome.SUCCEEDED, status_code=200)  # fmt: skip
    return RunChange(state=RunState.SUCCEEDED, now=at, deadline_at=at, append=record, finished_at=at)


def test_every_write_keeps_the_columns_equal_to_the_document(engine: EmbeddedEngine) -> None:
    job = _job(engine)
    batch, single, taken = _run(job, NOW), _run(job, NOW - 1_000), _run(job, NOW - 2_000)
    # created: only expires_at is set
    assert engine.store.insert_runs([batch, single, taken]) == [True] * 3
    assert _columns(engine, batch) == (None, None, EXPIRES)
    # leased in a batch (one statement) and one by one (the per-run path)
    leased = engine.store.lease_runs([LeaseRequest(job.id, r.scheduled_at, LEASE) for r in (batch, taken)], "w1", NOW)
    one = engine.store.lease_run(job.id, single.scheduled_at, "w1", NOW + 5, LEASE).run
    assert one is not None
    assert _columns(engine, batch) == (NOW, None, EXPIRES) and _columns(engine, single)[0] == NOW + 5
    # a heartbeat, then a takeover after the lease ended: started_at is kept
    assert engine.store.heartbeat_runs([Beat(Hold(job.id, taken.scheduled_at, "w1", 1), NOW + LEASE)]) == [True]
    later = NOW + 2 * LEASE
    again = engine.store.lease_runs([LeaseRequest(job.id, taken.scheduled_at, LEASE)], "w2", later)[0].run
    assert again is not None and again.attempt == 2 and _columns(engine, taken)[0] == NOW
    _no_drift(engine)
    # finished in a batch with the worker's copy, and one by one
    first = leased[0].run
    assert first is not None
    hold = Hold(job.id, batch.scheduled_at, "w1", 1)
    assert engine.finish_and_ack([Finish(hold, _succeeded(first, NOW + 100), None, first)])[0] is not None
    engine.store.finish_run(job.id, single.scheduled_at, "w1", 1, _succeeded(one, NOW + 200))
    assert _columns(engine, batch) == (NOW, NOW + 100, EXPIRES)
    assert _columns(engine, single) == (NOW + 5, NOW + 200, EXPIRES)
    # cancelled under its lease (a transition)
    current = engine.store.get_run(job.id, taken.scheduled_at)
    cancel = RunChange(state=RunState.CANCELLED, now=later, deadline_at=later, finished_at=later + 1, note="x")
    engine.store.transition_run(current, cancel)
    assert _columns(engine, taken) == (NOW, later + 1, EXPIRES)
    _no_drift(engine)


def test_a_v8_file_gets_the_columns_from_its_run_documents(tmp_path: Path) -> None:
    # Given a file as version 8 left it, with a finished run and a scheduled one
    path = tmp_path / "p.db"
    with sqlite3.connect(path) as conn:
        for step in schema.MIGRATIONS[:8]:
            for statement in step:
                conn.execute(statement)
        conn.execute("INSERT INTO meta (key, value) VALUES ('shards', '1')")
        conn.execute("PRAGMA user_version = 8")
        done = {"job_id": "job_a", "scheduled_at": NOW, "owner": "alice", "state": "succeeded", "attempt": 1,
                "started_at": NOW + 7, "finished_at": NOW + 9, "expires_at": EXPIRES, "deadline_at": NOW,
                "created_at": NOW}  # fmt: skip
        waiting = {**done, "scheduled_at": NOW + 1, "state": "scheduled", "attempt": 0, "started_at": None,
                   "finished_at": None}  # fmt: skip
        for doc in (done, waiting):
            conn.execute(
                "INSERT INTO runs (job_id, scheduled_at, owner, state, attempt, deadline_at, created_at, doc)"
                " VALUES (?, ?, 'alice', ?, ?, ?, ?, ?)",
                (doc["job_id"], doc["scheduled_at"], doc["state"], doc["attempt"], NOW, NOW, json.dumps(doc)),
            )
    # When it is opened
    Database(path, shards=1).close()
    # Then each run's columns hold its document's times, and the indexes are the current ones
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT started_at, finished_at, expires_at FROM runs ORDER BY scheduled_at").fetchall()
        indexes = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"))
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
    assert "tenant_starts" in tables and "tenant_rates" not in tables  # v10: one rate record per owner
    assert rows == [(NOW + 7, NOW + 9, EXPIRES), (None, None, EXPIRES)]
    assert indexes == schema.current_indexes()
    assert "json_extract" not in indexes["runs_stats"] + indexes["runs_expired"]
