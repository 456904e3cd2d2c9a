"""Bulk loading on the embedded engine: prepared copies, few transactions, indexes built after the load."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from punctual import ids
from punctual.bench.jobs import bench_jobs
from punctual.clock import ManualClock
from punctual.engines.embedded import EmbeddedEngine
from punctual.engines.embedded.schema import current_indexes
from punctual.jobs import service

pytestmark = pytest.mark.unit

NOW = 1_800_000_000_000
SHARDS = 4


def _indexes(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
        }


def _copies(count: int, due_every: int = 10) -> Iterator[tuple[str, str, int]]:
    for i in range(count):
        yield f"job_{i:032x}", f"owner-{i % 3}", NOW - 1 if i % due_every == 0 else NOW + 86_400_000


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[EmbeddedEngine]:
    engine = EmbeddedEngine(tmp_path / "bulk.db", shards=SHARDS, clock=ManualClock(NOW))
    yield engine
    engine.close()


def template() -> object:
    return next(bench_jobs(1, now=NOW, due_at=NOW, shards=SHARDS))


def test_copies_load_as_full_jobs_with_their_indexes(engine: EmbeddedEngine) -> None:
    assert engine.store.bulk_load_copies(template(), _copies(1_000), batch=300) == 1_000
    assert _indexes(engine.path) >= set(current_indexes())  # rebuilt after the load
    job = engine.store.get_job(f"job_{10:032x}")
    assert (job.owner, job.next_run_at, job.due_shard) == ("owner-1", NOW - 1, ids.shard_of(job.id, SHARDS))
    due = [d for shard in range(SHARDS) for d in engine.store.due_jobs(shard, NOW, 1_000)]
    assert len(due) == 100 and all(d.next_run_at == NOW - 1 for d in due)
    listed, cursor = [], None
    for _ in range(10):
        page = service.list_jobs(engine.store, "owner-2", limit=100, cursor=cursor)
        listed += page.items
        if (cursor := page.cursor) is None:
            break
    assert len(listed) == 333 and {j.owner for j in listed} == {"owner-2"}


def test_a_second_load_keeps_the_indexes_and_skips_known_ids(engine: EmbeddedEngine) -> None:
    engine.store.bulk_load_copies(template(), _copies(100))
    assert engine.store.bulk_load_copies(template(), _copies(150), batch=40) == 50
    assert _indexes(engine.path) >= set(current_indexes())


def test_a_failed_load_still_rebuilds_the_indexes(engine: EmbeddedEngine) -> None:
    def failing() -> Iterator[tuple[str, str, int]]:
        yield from _copies(50)
        raise RuntimeError("the source broke")

    with pytest.raises(RuntimeError):
        engine.store.bulk_load_copies(template(), failing(), batch=20)
    assert _indexes(engine.path) >= set(current_indexes())


def test_opening_a_file_recreates_missing_indexes(tmp_path: Path) -> None:
    path = tmp_path / "crashed.db"
    EmbeddedEngine(path, shards=SHARDS, clock=ManualClock(NOW)).close()
    with sqlite3.connect(path) as conn:  # a load that died with its indexes dropped
        conn.execute("DROP INDEX jobs_due")
        conn.execute("DROP INDEX jobs_by_owner")
    engine = EmbeddedEngine(path, shards=SHARDS, clock=ManualClock(NOW))
    try:
        assert _indexes(path) >= set(current_indexes())
        assert engine.store.due_jobs(0, NOW, 10) == []  # INDEXED BY jobs_due works again
    finally:
        engine.close()


def test_bulk_load_jobs_takes_models_too(engine: EmbeddedEngine) -> None:
    jobs = list(bench_jobs(25, now=NOW, due_at=NOW, shards=SHARDS))
    assert engine.store.bulk_load_jobs(jobs, batch=10) == 25
    assert engine.store.get_job(jobs[7].id) == jobs[7]
