"""Small factories and helpers for the contract suite: stored Jobs and Runs built from model fields."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, TypeVar

from punctual import ids
from punctual.clock import ManualClock
from punctual.model import (
    Attempt,
    AttemptOutcome,
    HttpTarget,
    Job,
    JobStatus,
    Run,
    RunState,
)
from punctual.port import DueJob, Page, Queue, Store

T = TypeVar("T")

SECOND = 1_000
MINUTE = 60 * SECOND
HTTP = HttpTarget(url="https://example.com/hook")
_UNSET: Any = object()


def job_id_in_shard(shard: int, shards: int) -> str:
    """A fresh job id whose due shard is ``shard``."""
    while True:
        job_id = ids.new_job_id()
        if ids.shard_of(job_id, shards) == shard:
            return job_id


def make_job(
    owner: str,
    clock: ManualClock,
    *,
    shards: int,
    shard: int | None = None,
    schedule: str | None = "* * * * *",
    run_at: datetime | None = None,
    status: JobStatus = JobStatus.ACTIVE,
    next_run_at: int | None = _UNSET,
    created_at: int | None = None,
    **fields: Any,
) -> Job:
    """A stored-shape job. Active jobs default to ``next_run_at = now``; others to None."""
    job_id = job_id_in_shard(shard, shards) if shard is not None else ids.new_job_id()
    now = clock.now_ms()
    if next_run_at is _UNSET:
        next_run_at = now if status is JobStatus.ACTIVE else None
    if run_at is not None:
        schedule = None
    return Job(
        id=job_id,
        owner=owner,
        name=fields.pop("name", f"job-{job_id[-6:]}"),
        schedule=schedule,
        run_at=run_at,
        target=fields.pop("target", HTTP),
        status=status,
        next_run_at=next_run_at,
        due_shard=ids.shard_of(job_id, shards),
        created_at=now if created_at is None else created_at,
        updated_at=now if created_at is None else created_at,
        **fields,
    )


def make_run(
    job: Job,
    scheduled_at: int,
    clock: ManualClock,
    *,
    state: RunState = RunState.SCHEDULED,
    deadline_at: int | None = None,
    **fields: Any,
) -> Run:
    now = clock.now_ms()
    fields.setdefault("expires_at", now // 1000 + 30 * 86_400)
    return Run(
        job_id=job.id,
        scheduled_at=scheduled_at,
        owner=job.owner,
        state=state,
        deadline_at=scheduled_at + 2 * MINUTE if deadline_at is None else deadline_at,
        created_at=now,
        **fields,
    )


def attempt(
    number: int,
    worker_id: str,
    started_at: int,
    finished_at: int,
    outcome: AttemptOutcome = AttemptOutcome.SUCCEEDED,
    **fields: Any,
) -> Attempt:
    return Attempt(
        number=number, worker_id=worker_id, started_at=started_at, finished_at=finished_at, outcome=outcome, **fields
    )


def due_view(job: Job, store: Store | None = None) -> DueJob:
    """What the due index must carry for ``job`` in ``store``: the job's ``timeout_s`` too where the
    engine routes long runs to their own queue (aws), None where one queue serves all (embedded)."""
    assert job.next_run_at is not None
    from punctual.engines.aws.store import DynamoStore

    routes = isinstance(store, DynamoStore)
    return DueJob(
        job_id=job.id,
        owner=job.owner,
        next_run_at=job.next_run_at,
        schedule=job.schedule,
        timezone=job.timezone,
        jitter_s=job.jitter_s,
        overlap=job.overlap,
        catchup=job.catchup,
        max_backfill=job.max_backfill,
        last_run_at=job.last_run_at,
        due_shard=job.due_shard,
        timeout_s=job.timeout_s if routes else None,
    )


def all_pages(fetch: Callable[[str | None], Page[T]], max_pages: int = 50) -> Iterator[list[T]]:
    """Every page of a cursor listing, refusing to loop forever."""
    cursor: str | None = None
    for _ in range(max_pages):
        page = fetch(cursor)
        yield page.items
        if page.cursor is None:
            return
        cursor = page.cursor
    raise AssertionError(f"listing did not end within {max_pages} pages")


def drain(queue: Queue, visibility_s: int = 300, max_rounds: int = 200) -> list[Any]:
    """Receive every visible message (hiding each for ``visibility_s``)."""
    got: list[Any] = []
    for _ in range(max_rounds):
        batch = queue.receive(10, visibility_s)
        if not batch:
            return got
        got.extend(batch)
    raise AssertionError("queue did not drain")
