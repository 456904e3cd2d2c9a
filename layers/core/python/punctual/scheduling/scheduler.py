"""The scheduler: every second, claim the due jobs of the owned shards (``punctual.scheduling.claim``).

One instance per process or Lambda invocation. The same code runs as ``punctual scheduler``
(long-running), as the scheduler Lambda (a ~1 minute loop per EventBridge invocation) and inside
``punctual dev``. Time only decides *when*; the claim's conditional writes decide *what*.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from punctual import metrics as m
from punctual.clock import Clock, SkewCorrectedClock
from punctual.config import Settings
from punctual.port import Engine, SkewSource
from punctual.scheduling.claim import ClaimStats, claim_page
from punctual.scheduling.planning import Plan, PlanOptions
from punctual.scheduling.shards import OwnershipOptions, ShardOwnership

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SchedulerOptions:
    lookahead_ms: int = 3_000  # claim this far ahead: runs are queued with a delay, visible on their second
    page_size: int = 500  # due jobs per claim page
    tick_ms: int = 1_000
    tick_budget_ms: int = 2_500  # stop paging a backlog after this; the next tick continues it
    plan: PlanOptions = field(default_factory=PlanOptions)
    ownership: OwnershipOptions = field(default_factory=OwnershipOptions)


def options_from_settings(settings: Settings) -> SchedulerOptions:
    return SchedulerOptions(
        lookahead_ms=settings.lookahead_ms,
        plan=PlanOptions(
            retention_s=settings.retention_s, long_run_after_s=settings.long_run_after_s, early_s=settings.prelease_s
        ),
    )


class Scheduler:
    name = "scheduler"

    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        *,
        metrics: m.Metrics,
        options: SchedulerOptions | None = None,
        instance: int = 0,
        instances: int = 1,
        owner: str | None = None,
        skew: SkewSource | None = None,
    ) -> None:
        self.engine = engine
        self.clock = SkewCorrectedClock(clock, skew)
        self.metrics = metrics
        self.options = options or SchedulerOptions()
        self.owner = owner or f"scheduler-{uuid.uuid4().hex[:12]}"
        self.ownership = ShardOwnership(
            engine.store, self.owner, instance=instance, instances=instances, options=self.options.ownership
        )

    def tick(self) -> ClaimStats:
        """One pass: refresh shard leases, then claim every owned shard's due jobs, page by page.

        Shards are visited round-robin, one page each, so a backlog in one shard does not starve
        the others; paging stops after ``tick_budget_ms`` and the next tick continues.
        """
        started = self.clock.now_ms()
        shards = self.ownership.refresh(started)
        self.metrics.gauge(m.SHARDS_OWNED, len(shards))
        self.metrics.gauge(m.SCHEDULER_SKEW_MS, self.clock.skew())
        total = ClaimStats()
        pending = list(shards)
        while pending and self.clock.now_ms() - started < self.options.tick_budget_ms:
            pending = [shard for shard in pending if self._claim_one_page(shard, total)]
        self.metrics.count(m.RUNS_DISPATCHED, total.dispatched)
        self.metrics.count(m.CLAIM_CONFLICTS, total.conflicts)
        return total

    def run(
        self,
        stop: threading.Event,
        *,
        until_ms: int | None = None,
        after_tick: Callable[[], None] | None = None,
        release_on_stop: bool = True,
    ) -> ClaimStats:
        """Tick every second until ``stop`` is set (or ``until_ms``, or a successor took the shards
        over: ``ShardOwnership.handed_over``), then release the shard leases.

        ``after_tick`` runs after every tick (the Lambda flushes its metrics there). Without
        ``release_on_stop`` the leases are kept until they expire. A release only ever expires this
        owner's own leases (owner and epoch): a successor's are left alone.
        """
        total = ClaimStats()
        try:
            while not stop.is_set() and self._on_duty(until_ms):
                try:
                    total.add(self.tick())
                except Exception:  # one failed tick (throttling, a network blip) must not end the loop
                    logger.exception("scheduler tick failed; retrying on the next tick")
                if after_tick is not None:
                    after_tick()
                stop.wait(self._until_next_tick())
        finally:
            if release_on_stop:
                self.ownership.release_all()
        return total

    def _on_duty(self, until_ms: int | None) -> bool:
        """Before ``until_ms``, and no successor took the shards over (``ShardOwnership.handed_over``)."""
        return not self.ownership.handed_over and (until_ms is None or self.clock.now_ms() < until_ms)

    def _claim_one_page(self, shard: int, total: ClaimStats) -> bool:
        """Claim one page of ``shard``; True if the shard may have more due jobs.

        A failure (throttling, a network error) ends this shard's turn for this tick only: the
        other shards go on, and the claim is safe to repeat on the next tick.
        """
        try:
            return self._claim_page(shard, total)
        except Exception:
            logger.exception("claiming shard %d failed; retrying it on the next tick", shard)
            return False

    def _claim_page(self, shard: int, total: ClaimStats) -> bool:
        claimed_at = self.clock.now_ms()
        seen: list[Plan] = []
        stats = claim_page(
            self.engine.store,
            self.engine.queue,
            shard,
            claimed_at,
            lookahead_ms=self.options.lookahead_ms,
            limit=self.options.page_size,
            options=self.options.plan,
            on_plans=seen.extend,
        )
        self._observe_lateness(seen, claimed_at, self.clock.now_ms())
        total.add(stats)
        return stats.due >= self.options.page_size and stats.advanced > 0

    def _observe_lateness(self, plans: list[Plan], claimed_at: int, sent_at: int) -> None:
        """Lateness of the moment each run became available to a worker, relative to its start time.

        A precomputed run is available at ``claimed_at + delay`` (at most a second early: the
        worker waits out the rest), a late one as soon as it was sent.
        """
        for p in plans:
            for run, dispatch in zip(p.runs, p.dispatches, strict=True):
                if run.is_open:
                    available = max(sent_at, claimed_at + dispatch.delay_s * 1000)
                    self.metrics.observe(m.DISPATCH_LATENESS_MS, max(0, available - dispatch.not_before))

    def _until_next_tick(self) -> float:
        tick = self.options.tick_ms
        return (tick - self.clock.now_ms() % tick) / 1000
