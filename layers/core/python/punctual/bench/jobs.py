"""Synthetic jobs for benchmarks: no-op targets, chosen due times, bulk-loaded into the embedded store."""

from __future__ import annotations

from collections.abc import Iterator

from punctual import ids
from punctual.clock import to_datetime
from punctual.model import HttpTarget, Job, JobStatus

BENCH_OWNER = "bench"
NOOP_URL = "http://127.0.0.1:9/noop"  # never called by the claim benchmarks


def bench_jobs(
    count: int, *, now: int, due_at: int, shards: int, cron: str | None = "* * * * *", url: str = NOOP_URL
) -> Iterator[Job]:
    """``count`` active jobs, all with ``next_run_at = due_at``: cron jobs, or one-time jobs if ``cron`` is None."""
    target = HttpTarget(url=url)
    for _ in range(count):
        job_id = ids.new_job_id()
        yield Job.model_construct(
            **_defaults(),
            id=job_id,
            owner=BENCH_OWNER,
            name="bench",
            schedule=cron,
            run_at=None if cron is not None else to_datetime(due_at),
            target=target,
            status=JobStatus.ACTIVE,
            next_run_at=due_at,
            last_run_at=None,
            due_shard=ids.shard_of(job_id, shards),
            created_at=now,
            updated_at=now,
            version=1,
        )


def _defaults() -> dict[str, object]:
    from punctual.model import Catchup, Overlap, RetryPolicy

    return {
        "timezone": "UTC",
        "payload": None,
        "timeout_s": 10,
        "max_retries": 0,
        "retry": RetryPolicy(),
        "jitter_s": 0,
        "overlap": Overlap.ALLOW,
        "catchup": Catchup.LATEST,
        "max_backfill": 10,
    }
