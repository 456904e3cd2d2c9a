"""Synthetic jobs for benchmarks: no-op targets, chosen due times, bulk-loaded into the embedded store."""

from __future__ import annotations

from collections.abc import Iterator

from punctual import ids
from punctual.clock import to_datetime
from punctual.model import Catchup, HttpTarget, Job, JobStatus, Overlap, RetryPolicy

BENCH_OWNER = "bench"
NOOP_URL = "http://127.0.0.1:9/noop"  # never called by the claim benchmarks


def bench_jobs(
    count: int,
    *,
    now: int,
    due_at: int,
    shards: int,
    cron: str | None = "* * * * *",
    url: str = NOOP_URL,
    owner: str = BENCH_OWNER,
) -> Iterator[Job]:
    """``count`` active jobs, all with ``next_run_at = due_at``: cron jobs, or one-time jobs if ``cron`` is None."""
    target = HttpTarget(url=url)
    retry = RetryPolicy()
    run_at = None if cron is not None else to_datetime(due_at)
    for _ in range(count):
        job_id = ids.new_job_id()
        # model_construct: a million validated models would dominate the benchmark's load time
        yield Job.model_construct(
            id=job_id,
            owner=owner,
            name="bench",
            schedule=cron,
            timezone="UTC",
            run_at=run_at,
            payload=None,
            target=target,
            timeout_s=10,
            max_retries=0,
            retry=retry,
            jitter_s=0,
            overlap=Overlap.ALLOW,
            catchup=Catchup.LATEST,
            max_backfill=10,
            status=JobStatus.ACTIVE,
            next_run_at=due_at,
            last_run_at=None,
            due_shard=ids.shard_of(job_id, shards),
            created_at=now,
            updated_at=now,
            version=1,
        )
