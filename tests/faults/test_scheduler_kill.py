"""A scheduler killed with SIGKILL in the middle of a batch loses no run, and another instance
takes its shards over within the lease time (embedded engine, real processes)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from punctual.bench.jobs import bench_jobs
from punctual.clock import SystemClock
from punctual.engines.embedded import EmbeddedEngine
from tests.waiting import eventually

pytestmark = pytest.mark.faults

JOBS = 20_000  # enough that one claim pass takes a while, so the kill lands mid-batch
SHARDS = 4
LEASE_TTL_MS = 2_000


def _start_scheduler(data_dir: Path, owner: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "punctual.cli", "scheduler", "--data-dir", str(data_dir)),
            *("--shards", str(SHARDS), "--lookahead-ms", "0", "--lease-ttl-ms", str(LEASE_TTL_MS), "--owner", owner),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _query(db: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(db, timeout=30) as conn:
        return conn.execute(sql).fetchall()


def test_killed_scheduler_loses_no_run_and_its_shards_are_taken_over(tmp_path: Path) -> None:
    # Given 20,000 one-time jobs, all due now
    db = tmp_path / "punctual.db"
    clock = SystemClock()
    engine = EmbeddedEngine(db, shards=SHARDS, clock=clock)
    due_at = clock.now_ms() - 1_000
    engine.store.bulk_load_jobs(bench_jobs(JOBS, now=clock.now_ms(), due_at=due_at, shards=SHARDS, cron=None))  # type: ignore[attr-defined]
    engine.close()

    # When scheduler A is killed with SIGKILL while it is claiming them
    a = _start_scheduler(tmp_path, "scheduler-a")
    try:
        assert eventually(lambda: _query(db, "SELECT count(*) FROM runs")[0][0] > 0, timeout_s=30, every_s=0.02)
        a.send_signal(signal.SIGKILL)
    finally:
        a.wait(timeout=10)
    killed_at = time.monotonic()
    claimed_by_a = _query(db, "SELECT count(*) FROM runs")[0][0]
    assert claimed_by_a < JOBS, "the kill should land mid-batch"

    # Then scheduler B owns every shard within the lease time (plus a tick), and claims the rest.
    # The clock starts when B is up (its first shard): a loaded machine may take seconds to start
    # a Python process, which says nothing about the takeover.
    b = _start_scheduler(tmp_path, "scheduler-b")
    try:
        owned = "SELECT count(*) FROM shard_leases WHERE owner = 'scheduler-b'"
        assert eventually(lambda: _query(db, owned)[0][0] > 0, timeout_s=60, every_s=0.02)
        b_up_at = time.monotonic()
        assert eventually(lambda: _query(db, owned)[0][0] == SHARDS, timeout_s=LEASE_TTL_MS / 1000 + 5, every_s=0.02)
        takeover_s = time.monotonic() - max(b_up_at, killed_at + LEASE_TTL_MS / 1000)
        done = lambda: _query(db, "SELECT count(*) FROM jobs WHERE status = 'active'")[0][0] == 0  # noqa: E731
        assert eventually(done, timeout_s=60, every_s=0.02)
    finally:
        b.send_signal(signal.SIGTERM)
        b.wait(timeout=20)
    assert takeover_s < 2.5  # past the later of "B is up" and "A's leases expired", within a tick or two

    # No run lost, none twice: one row per job at its time, and every row has a message
    rows = _query(db, "SELECT job_id, scheduled_at, state FROM runs")
    assert len(rows) == JOBS
    assert {r[1] for r in rows} == {due_at}
    assert len({r[0] for r in rows}) == JOBS
    messaged = {json.loads(body)["run_id"] for (body,) in _query(db, "SELECT body FROM queue")}
    run_ids = {f"run_{job_id[4:]}_{at}" for job_id, at, _ in rows}
    assert run_ids <= messaged
    # B released its leases on SIGTERM: another instance could take over at once
    live = f"SELECT count(*) FROM shard_leases WHERE expires_at >= {clock.now_ms()} AND owner = 'scheduler-b'"
    assert _query(db, live)[0][0] == 0
