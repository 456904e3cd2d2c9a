"""``GET /stats``: the caller's operational figures, aggregated by the engine (read-only).

Runs by outcome per bucket (a minute up to a 6 h window; 5 min, 15 min or an hour for windows up
to 24 h, 3 days and 7 days: ``port.stats.bucket_minutes``) and the start-lateness histogram
(p50/p99) come from ``Store.run_stats`` (the engine counts; nothing here reads runs one by one).
The caller's backlog (its due runs waiting and executing now) comes from ``Store.open_runs``.

The queue figures are the deployment's, shared by every owner, so they are answered to operators
only (``Settings.admin_principals``) and are null for everyone else (a queue's depth tells one
owner how busy the others are): the depth of the dispatch queue and of its dead-letter queue. The
clock skew is this API host's clock against the storage service's (AWS ``Date`` headers; null on
the embedded engine, where one clock serves everything): a fact about the hosts, not about any
owner's runs, answered to all.

A deployment may keep no run figures (``-c stats_counters=false`` on AWS: counting costs a write
unit per run there). Then ``runs_counted`` is false and ``totals``, ``per_minute`` and
``lateness`` are null (unavailable, not zero); the queue figures and the skew are still answered.

A Powertools :class:`Router` that ``punctual.api.app`` includes (it shares the app's context).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import BaseModel, Field

from punctual.api import openapi
from punctual.api.caller import Services, caller
from punctual.api.schemas import IsoTime
from punctual.clock import iso
from punctual.port import stats as rs

MAX_MINUTES = rs.MAX_WINDOW_MINUTES  # 7 days: the aws engine reads it in 8 Queries (engines/aws/stats.py)
OPEN_RUNS_READ = 1_000  # the caller's open runs counted at most (beyond: lower bounds, complete=false)

router = Router()  # type: ignore[no-untyped-call]  # Powertools leaves __init__ unannotated


class MinuteCounts(BaseModel):
    """Runs that turned terminal in one bucket (``bucket_minutes`` long, from ``minute``), by outcome."""

    minute: IsoTime = Field(description="the start of the bucket")
    succeeded: int = 0
    failed: int = 0
    dead: int = 0
    cancelled: int = 0


class LatenessBucket(BaseModel):
    le_ms: int | None = Field(description="upper bound in ms (inclusive); null for the last bucket (above the rest)")
    count: int


class Lateness(BaseModel):
    """Start lateness (started_at - scheduled_at) of the runs counted, as a histogram."""

    count: int
    p50_ms: int | None = Field(description="upper bound of the bucket holding the median; null without runs")
    p99_ms: int | None = Field(description="upper bound of the bucket holding the 99th percentile")
    buckets: list[LatenessBucket]


class QueueFigures(BaseModel):
    depth: int | None = Field(description="approximate messages in the dispatch queue (delayed and in flight too)")
    dead_letters: int | None = Field(description="approximate messages in the dead-letter queue")


class OpenRunCounts(BaseModel):
    """The caller's due runs now: waiting to start (or between attempts) and executing."""

    waiting: int = Field(description="scheduled or retrying, due (scheduled_at <= now), not executing")
    executing: int = Field(description="running: an attempt is under way")
    complete: bool = Field(description="false when the engine stopped counting at its bound: lower bounds")


class Stats(BaseModel):
    """The caller's runs that turned terminal in ``[since, until)``, its backlog, and (operators
    only) the deployment's queues."""

    since: IsoTime
    until: IsoTime
    bucket_minutes: int = Field(
        description="minutes in each per_minute entry: 1 up to a 360-minute window, then 5 (24 h), 15 (3 days), 60"
    )
    runs_counted: bool = Field(
        description="false when the deployment keeps no run figures (stats_counters=false):"
        " totals, per_minute and lateness are then null"
    )
    totals: dict[str, int] | None = Field(description="runs per terminal state over the window (null: not counted)")
    per_minute: list[MinuteCounts] | None = Field(
        description="every bucket of the window (bucket_minutes each), oldest first (null: not counted)"
    )
    lateness: Lateness | None = Field(description="start lateness of the runs counted (null: not counted)")
    open_runs: OpenRunCounts | None = Field(
        description="the caller's due runs waiting and executing now (null: the engine cannot count them,"
        " the aws engine without its open index)"
    )
    queue: QueueFigures | None = Field(
        description="the deployment's queues, shared by every owner: answered to operators"
        " (PUNCTUAL_ADMIN_PRINCIPALS) only, null for owners"
    )
    clock_skew_ms: int | None = Field(description="storage service clock minus this host's; null on embedded")


@router.get(
    "/stats",
    operation_id="getStats",
    tags=["stats"],
    summary="Runs per minute by outcome, start lateness, queue depth and dead letters (read-only)",
    responses=openapi.responses({200: ("The figures", Stats)}, openapi.LIST_ERRORS),
)
def get_stats(
    minutes: Annotated[
        int, Query(ge=1, le=MAX_MINUTES, description="window: the last N minutes (up to 10080, 7 days)")
    ] = 60,
) -> Stats:
    services, owner = _caller()
    now = services.clock.now_ms()
    bucket = rs.bucket_minutes(minutes)
    since, until = rs.window(now, minutes, bucket)
    figures = services.store.run_stats(owner, since, until)
    backlog = services.store.open_runs(owner, now, OPEN_RUNS_READ)
    queue = None
    if owner in services.settings.admins:
        queue = QueueFigures(depth=_depth(services.queue), dead_letters=_depth(services.dead_letters))
    answer = Stats(
        since=iso(since) or "",
        until=iso(until) or "",
        bucket_minutes=bucket,
        runs_counted=figures is not None,
        totals=None,
        per_minute=None,
        lateness=None,
        open_runs=None if backlog is None else OpenRunCounts(**asdict(backlog)),
        queue=queue,
        clock_skew_ms=_skew(services),
    )
    return answer if figures is None else counted(answer, figures, bucket)


def counted(answer: Stats, figures: rs.RunStats, bucket: int) -> Stats:
    """``answer`` with the run figures of ``figures``, added up per ``bucket`` minutes."""
    step = bucket * rs.MINUTE_MS
    per_bucket: list[MinuteCounts] = []
    for start in range(figures.since, figures.until, step):
        counts = dict.fromkeys(rs.STATES, 0)
        for minute in range(start, min(start + step, figures.until), rs.MINUTE_MS):
            for state, count in figures.per_minute.get(minute, {}).items():
                counts[state] += count
        per_bucket.append(MinuteCounts(minute=iso(start) or "", **{s.value: c for s, c in counts.items()}))
    bounds: list[int | None] = [*rs.LATENESS_BOUNDS_MS, None]
    return answer.model_copy(
        update={
            "totals": {state.value: count for state, count in figures.totals().items()},
            "per_minute": per_bucket,
            "lateness": Lateness(
                count=figures.started,
                p50_ms=figures.percentile(50),
                p99_ms=figures.percentile(99),
                buckets=[LatenessBucket(le_ms=b, count=c) for b, c in zip(bounds, figures.lateness, strict=True)],
            ),
        }
    )


def _depth(queue: Any) -> int | None:
    return None if queue is None else int(queue.depth())


def _skew(services: Services) -> int | None:
    """The engine's service clock against ours (``Engine.clock_skew``, kept in ``Services.skew``)."""
    return None if services.skew is None else services.skew.skew_ms


def _caller() -> tuple[Services, str]:
    return caller(router.context)
