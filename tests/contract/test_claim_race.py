"""Contract: two schedulers claiming the same shard at the same time create one run per due time.

The aws engine's DynamoDB calls are serialized (moto is not thread-safe, FACTS.md), so the race is
between whole requests, as it is between two schedulers on DynamoDB: a claim's read, inserts,
sends and advances interleave with the other claim's.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from punctual.clock import ManualClock
from punctual.model import Catchup, Job
from punctual.port import Engine, RunQuery
from punctual.scheduling import cron as schedule
from punctual.scheduling.claim import ClaimStats, claim_page
from tests.contract.factories import MINUTE, all_pages, drain, make_job

pytestmark = pytest.mark.contract

SHARD = 0
PAGE = 4
TICKS = 3


def _claim_shard(
    engine: Engine, now: int, stats: list[ClaimStats], errors: list[BaseException], start: threading.Barrier
) -> None:
    try:
        start.wait(timeout=10)
        for _ in range(20):  # page through the shard, like the scheduler's tick
            page = claim_page(engine.store, engine.queue, SHARD, now, lookahead_ms=3_000, limit=PAGE)
            stats.append(page)
            if page.due < PAGE:
                return
        raise AssertionError("the shard never ran out of due jobs")
    except BaseException as exc:
        errors.append(exc)


def test_two_schedulers_on_one_shard_create_one_run_per_due_time(engine: Engine, clock: ManualClock) -> None:
    # Given 10 jobs due now in one shard (two of them missed several times: backfill and latest)
    t0 = clock.now_ms()
    jobs: list[Job] = [make_job("alice", clock, shards=engine.store.shards, shard=SHARD) for _ in range(8)]
    jobs.append(
        make_job(
            "alice",
            clock,
            shards=engine.store.shards,
            shard=SHARD,
            catchup=Catchup.BACKFILL,
            next_run_at=t0 - 3 * MINUTE,
        )
    )
    jobs.append(
        make_job(
            "alice",
            clock,
            shards=engine.store.shards,
            shard=SHARD,
            catchup=Catchup.LATEST,
            next_run_at=t0 - 3 * MINUTE,
            jitter_s=1,
        )
    )
    for job in jobs:
        engine.store.create_job(job)

    # When two schedulers claim the shard concurrently, tick after tick
    stats: list[ClaimStats] = []
    for _ in range(TICKS):
        errors: list[BaseException] = []
        start = threading.Barrier(2)
        threads = [
            threading.Thread(target=_claim_shard, args=(engine, clock.now_ms(), stats, errors, start)) for _ in range(2)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
        assert not errors, errors
        clock.advance(MINUTE)

    # Then every due time got exactly one run row, and every run has a message
    expected: dict[str, list[int]] = {}
    for job in jobs:
        ticks = [t0 + i * MINUTE for i in range(TICKS)]
        if job.catchup is Catchup.BACKFILL:
            ticks = [t0 - 3 * MINUTE, t0 - 2 * MINUTE, t0 - MINUTE, *ticks]
        expected[job.id] = ticks
    for job in jobs:
        runs = [
            r
            for page in all_pages(lambda c, j=job: engine.store.list_runs(j.id, RunQuery(limit=100, cursor=c)))
            for r in page
        ]
        times = sorted(r.scheduled_at for r in runs)
        assert times == expected[job.id], job
        stored = engine.store.get_job(job.id)
        assert stored.next_run_at == schedule.next_fire("* * * * *", "UTC", expected[job.id][-1])
        assert stored.last_run_at == expected[job.id][-1]

    total_runs = sum(len(v) for v in expected.values())
    assert sum(s.inserted for s in stats) == total_runs  # an insert is won exactly once
    assert sum(s.advanced for s in stats) == len(jobs) * TICKS  # each job advanced once per tick

    messages = drain(engine.queue)
    sent = Counter(m.run_id for m in messages)
    from punctual import ids

    for job_id, times in expected.items():
        for at in times:
            assert sent[ids.run_id_for(job_id, at)] >= 1, (job_id, at)
    assert set(sent) == {ids.run_id_for(j, t) for j, ts in expected.items() for t in ts}
    # a redispatch of the same run lands on the same instant
    not_before: dict[str, set[int]] = {}
    for m in messages:
        not_before.setdefault(m.run_id, set()).add(m.not_before)
    assert all(len(v) == 1 for v in not_before.values())
