"""The scheduler: every second, claim the due jobs of the owned shards (``punctual.scheduling.claim``).

One instance per process or Lambda invocation. The same code runs as ``punctual scheduler``
(long-running), as the scheduler Lambda (a ~1 minute loop per EventBridge invocation) and inside
``punctual dev``. Time only decides *when*; the claim's conditional writes decide *what*.

A failed tick is retried by the next one, and every tick is judged and reported
(``punctual.scheduling.health``). A loop whose ticks keep achieving nothing raises
:class:`~punctual.scheduling.health.SchedulerFailing`, so the failure surfaces as a Lambda error or a
process exit instead of a healthy-looking loop that dispatches nothing.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from punctual import metrics as m
from punctual.calendars.cache import CalendarCache
from punctual.clock import Clock, SkewCorrectedClock
from punctual.config import Settings
from punctual.errors import ConfigError
from punctual.port import Engine, SkewSource, Store
from punctual.scheduling.claim import ClaimStats, claim_page
from punctual.scheduling.health import TickHealth, TickOutcome
from punctual.scheduling.planning import Plan, PlanOptions
from punctual.scheduling.shards import OwnershipOptions, ShardOwnership

logger = logging.getLogger(__name__)

# Every scheduler reports ShardsOwned once per window of this length, so that the fleet's sum can be
# read as a count of shards whatever the tick rate: 6 reports a minute per running scheduler.
SHARDS_OWNED_EVERY_MS = 10_000


@dataclass(frozen=True, slots=True)
class SchedulerOptions:
    lookahead_ms: int = 3_000  # claim this far ahead: runs are queued with a delay, visible on their second
    page_size: int = 500  # due jobs per claim page
    tick_ms: int = 1_000
    tick_budget_ms: int = 2_500  # stop paging a backlog after this; the next tick continues it
    plan: PlanOptions = field(default_factory=PlanOptions)
    ownership: OwnershipOptions = field(default_factory=OwnershipOptions)
    # give up (raise SchedulerFailing) after this many ticks in a row that achieved nothing; 0: never
    max_failed_ticks: int = Settings.model_fields["scheduler_max_failed_ticks"].default


def options_from_settings(settings: Settings) -> SchedulerOptions:
    return SchedulerOptions(
        lookahead_ms=settings.lookahead_ms,
        plan=PlanOptions(
            retention_s=settings.retention_s,
            long_run_after_s=settings.long_run_after_s,
            early_s=settings.prelease_s,
            window_ms=settings.claim_window_s * 1000,
        ),
        max_failed_ticks=settings.scheduler_max_failed_ticks,
    )


def check_shard_layout(store: Store) -> None:
    """Raise :class:`ConfigError` if the store was scheduled with more due shards than ``store.shards``.

    Jobs keep the shard they were created in: with fewer shards, those beyond would never be
    claimed again, silently. Their shard leases (every lease ever written stays) show it; the
    embedded engine also records its shard count in the file. One read, at a scheduler's first tick.
    """
    beyond = sorted(lease.shard for lease in store.shard_leases() if lease.shard >= store.shards)
    if beyond:
        raise ConfigError(
            f"this store's jobs were scheduled over {beyond[-1] + 1} due shards, but PUNCTUAL_SHARDS is "
            f"{store.shards}: jobs in shards {beyond[0]}-{beyond[-1]} would never run; deploy with the "
            f"shard count they were created with (-c shards=... on AWS)"
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
        self.calendars = CalendarCache(engine.store, self.clock)  # read once per 10 s each, not per job
        self._owned_reported_in: int | None = None  # the SHARDS_OWNED_EVERY_MS window last reported
        self._first_tick_at: int | None = None  # this scheduler reports no window it started within
        self._last_error: Exception | None = None  # the latest failure, the cause of a SchedulerFailing

    def tick(self) -> ClaimStats:
        """One pass: refresh shard leases, then claim every owned shard's due jobs, page by page.

        Shards are visited round-robin, one page each, so a backlog in one shard does not starve
        the others; paging stops after ``tick_budget_ms`` and the next tick continues.
        """
        started = self.clock.now_ms()
        if self._first_tick_at is None:
            check_shard_layout(self.engine.store)
            self._first_tick_at = started
        held = sum(1 for lease in self.ownership.leases.values() if lease.expires_at >= started)  # coming in
        shards = self.ownership.refresh(started)
        self._report_owned(started, held)
        self.metrics.gauge(m.SCHEDULER_SKEW_MS, self.clock.skew())
        total = ClaimStats()
        pending = list(shards)
        while pending and self.clock.now_ms() - started < self.options.tick_budget_ms:
            pending = [shard for shard in pending if self._claim_one_page(shard, total)]
        self.metrics.count(m.RUNS_DISPATCHED, total.dispatched)
        self.metrics.count(m.CLAIM_CONFLICTS, total.conflicts)
        if total.pages:  # no page read, no measurement: silence is what the claim lag alarm breaches on
            self.metrics.gauge(m.CLAIM_LAG_MS, total.lag_ms)
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

        Raises :class:`~punctual.scheduling.health.SchedulerFailing` (after releasing the leases,
        best effort) after ``options.max_failed_ticks`` ticks in a row that achieved nothing, or when
        a loop with ``until_ms`` ends (at ``until_ms``, or relieved by its successor) and no tick
        achieved anything. The tick that finds the successor is not judged: the hand-over is a normal
        stop, neither a failed tick nor one that achieved something.
        """
        total = ClaimStats()
        health = TickHealth(self.options.max_failed_ticks)
        gave_up = False
        try:
            while not stop.is_set() and self._on_duty(until_ms):
                outcome = self._tick_once(total)
                if not self.ownership.handed_over:  # the tick that found its successor claims nothing, by design
                    self._judge(outcome, health)
                if after_tick is not None:
                    after_tick()
                if health.exhausted:
                    gave_up = True
                    raise health.failing("too many ticks in a row failed") from self._last_error
                stop.wait(self._until_next_tick())
            if until_ms is not None and health.never_succeeded:  # slow failures: too few ticks to exhaust
                gave_up = True
                ended = "its successor took over" if self.ownership.handed_over else "the deadline"
                raise health.failing(f"no tick succeeded before {ended}") from self._last_error
        finally:
            if release_on_stop or gave_up:
                self._release_leases()
        return total

    def _on_duty(self, until_ms: int | None) -> bool:
        """Before ``until_ms``, and no successor took the shards over (``ShardOwnership.handed_over``)."""
        return not self.ownership.handed_over and (until_ms is None or self.clock.now_ms() < until_ms)

    def _tick_once(self, total: ClaimStats) -> TickOutcome:
        try:
            stats = self.tick()
        except ConfigError:  # a wrong deployment is not retried: the loop ends (an invocation error)
            raise
        except Exception as exc:  # one failed tick (throttling, a network blip) must not end the loop
            self._last_error = exc
            logger.exception("scheduler tick failed; retrying on the next tick")
            return TickOutcome.FAILED
        total.add(stats)
        return TickOutcome.of(stats)

    def _judge(self, outcome: TickOutcome, health: TickHealth) -> None:
        """Record and report one tick's outcome; every tick reports, so that silence means a dead loop."""
        health.record(outcome)
        if outcome is not TickOutcome.OK:
            self.metrics.count(m.SCHEDULER_TICK_FAILURES)
        self.metrics.gauge(m.SCHEDULER_FAILED_TICKS_IN_A_ROW, health.failed_in_a_row)

    def _release_leases(self) -> None:
        """Give the shards back (another instance takes them at once); a failure leaves them to expire."""
        try:
            self.ownership.release_all()
        except Exception:  # the store may be what failed: the leases then expire on their own
            logger.exception("releasing the shard leases failed; they expire on their own")

    def _report_owned(self, now: int, held: int) -> None:
        """Report once per ``SHARDS_OWNED_EVERY_MS`` window of the wall clock the shards this scheduler
        held as the window began: ``held``, its live leases coming into the window's first tick
        (before that tick's refresh), and nothing for a window it started within.

        Ticks may come slower than one a second (a tick that pages a backlog takes longer), but every
        running scheduler reports in every window. So the fleet's per-minute sum divided by the
        windows in a minute is the number of shards the fleet owns, which the alarm compares with
        ``shards``. A shard that changes hands within a window is counted once, by the owner it had
        as the window began. That matters every minute: the Lambda's hand-over moves each instance's
        shards to the next invocation a few seconds after the minute's top, and counting them for
        both would read the fleet up to a sixth high, enough to hide unowned shards. (A successor
        that takes over less than ``renew_every_ms`` before a window begins is counted in it with
        its predecessor, which has not noticed yet: a hand-over at :07-:10, say.)
        """
        window = now // SHARDS_OWNED_EVERY_MS
        if window == self._owned_reported_in:
            return
        self._owned_reported_in = window
        if self._first_tick_at is not None and self._first_tick_at < window * SHARDS_OWNED_EVERY_MS:
            self.metrics.gauge(m.SHARDS_OWNED, held)

    def _claim_one_page(self, shard: int, total: ClaimStats) -> bool:
        """Claim one page of ``shard``; True if the shard may have more due jobs.

        A failure (throttling, a network error) ends this shard's turn for this tick only: the
        other shards go on, and the claim is safe to repeat on the next tick.
        """
        try:
            return self._claim_page(shard, total)
        except Exception as exc:
            total.failed += 1
            self._last_error = exc
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
            calendars=self.calendars,
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
