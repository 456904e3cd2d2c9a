"""``GET /stats``: the caller's operational figures, aggregated by the engine (read-only).

Runs per minute by outcome and the start-lateness histogram (p50/p99) come from
``Store.run_stats`` (the engine counts; nothing here reads runs one by one). The queue figures
and the clock skew are the deployment's, the same for every owner: the depth of the dispatch
queue and of its dead-letter queue, and this API host's clock against the storage service's
(AWS ``Date`` headers; null on the embedded engine, where one clock serves everything).

A deployment may keep no run figures (``-c stats_counters=false`` on AWS: counting costs a write
unit per run there). Then ``runs_counted`` is false and ``totals``, ``per_minute`` and
``lateness`` are null (unavailable, not zero); the queue figures and the skew are still answered.

A Powertools :class:`Router` that ``punctual.api.app`` includes (it shares the app's context).
"""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import BaseModel, Field

from punctual.api import openapi
from punctual.api.caller import Services, caller
from punctual.api.schemas import IsoTime
from punctual.clock import iso
from punctual.port import stats as rs

MAX_MINUTES = 360  # the aws engine reads minutes x 8 counter items: 6 h is ~29 BatchGetItem requests

router = Router()  # type: ignore[no-untyped-call]  # Powertools leaves __init__ unannotated


class MinuteCounts(BaseModel):
    """Runs that turned terminal in one minute, by outcome."""

    minute: IsoTime
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


class Stats(BaseModel):
    """The caller's runs that turned terminal in ``[since, until)``, and the deployment's queues."""

    since: IsoTime
    until: IsoTime
    runs_counted: bool = Field(
        description="false when the deployment keeps no run figures (stats_counters=false):"
        " totals, per_minute and lateness are then null"
    )
    totals: dict[str, int] | None = Field(description="runs per terminal state over the window (null: not counted)")
    per_minute: list[MinuteCounts] | None = Field(
        description="every minute of the window, oldest first (null: not counted)"
    )
    lateness: Lateness | None = Field(description="start lateness of the runs counted (null: not counted)")
    queue: QueueFigures
    clock_skew_ms: int | None = Field(description="storage service clock minus this host's; null on embedded")


@router.get(
    "/stats",
    operation_id="getStats",
    tags=["stats"],
    summary="Runs per minute by outcome, start lateness, queue depth and dead letters (read-only)",
    responses=openapi.responses({200: ("The figures", Stats)}, openapi.LIST_ERRORS),
)
def get_stats(
    minutes: Annotated[int, Query(ge=1, le=MAX_MINUTES, description="window: the last N minutes")] = 60,
) -> Stats:
    services, owner = _caller()
    since, until = rs.window(services.clock.now_ms(), minutes)
    figures = services.store.run_stats(owner, since, until)
    queue = QueueFigures(depth=_depth(services.queue), dead_letters=_depth(services.dead_letters))
    if figures is None:
        return not_counted(since, until, queue=queue, skew=_skew(services))
    return to_stats(figures, depth=queue.depth, dead_letters=queue.dead_letters, skew=_skew(services))


def not_counted(since: int, until: int, *, queue: QueueFigures, skew: int | None) -> Stats:
    """The answer of a deployment that keeps no run figures: the run fields unavailable (null)."""
    return Stats(
        since=iso(since) or "",
        until=iso(until) or "",
        runs_counted=False,
        totals=None,
        per_minute=None,
        lateness=None,
        queue=queue,
        clock_skew_ms=skew,
    )


def to_stats(figures: rs.RunStats, *, depth: int | None, dead_letters: int | None, skew: int | None) -> Stats:
    per_minute = [
        MinuteCounts(
            minute=iso(minute) or "",
            **{state.value: count for state, count in figures.per_minute.get(minute, {}).items()},
        )
        for minute in range(figures.since, figures.until, rs.MINUTE_MS)
    ]
    bounds: list[int | None] = [*rs.LATENESS_BOUNDS_MS, None]
    return Stats(
        since=iso(figures.since) or "",
        until=iso(figures.until) or "",
        runs_counted=True,
        totals={state.value: count for state, count in figures.totals().items()},
        per_minute=per_minute,
        lateness=Lateness(
            count=figures.started,
            p50_ms=figures.percentile(50),
            p99_ms=figures.percentile(99),
            buckets=[LatenessBucket(le_ms=b, count=c) for b, c in zip(bounds, figures.lateness, strict=True)],
        ),
        queue=QueueFigures(depth=depth, dead_letters=dead_letters),
        clock_skew_ms=skew,
    )


def _depth(queue: Any) -> int | None:
    return None if queue is None else int(queue.depth())


def _skew(services: Services) -> int | None:
    """The engine's service clock against ours (``Engine.clock_skew``, kept in ``Services.skew``)."""
    return None if services.skew is None else services.skew.skew_ms


def _caller() -> tuple[Services, str]:
    return caller(router.context)
