"""A scheduler that keeps failing says so: every tick reports its outcome as metrics, and the loop
gives up (raises SchedulerFailing) after N ticks in a row in which nothing succeeded, or when its
deadline ends a loop in which no tick succeeded. A partial failure is counted but never stops the
healthy shards. (The Lambda handler's side: tests/integration/test_scheduler_handler.py.)"""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError

from punctual import metrics as m
from punctual.clock import ManualClock
from punctual.config import Settings
from punctual.engines.embedded import EmbeddedEngine
from punctual.port import Engine
from punctual.scheduling.claim import ClaimStats
from punctual.scheduling.health import SchedulerFailing, TickHealth, TickOutcome
from punctual.scheduling.scheduler import (
    SHARDS_OWNED_EVERY_MS,
    Scheduler,
    SchedulerOptions,
    options_from_settings,
)

pytestmark = pytest.mark.unit

START = 1_800_000_000_000
SHARDS = 4
RENEW_MS = SchedulerOptions().ownership.renew_every_ms


def access_denied(operation: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": "AccessDeniedException", "Message": f"not authorized to perform {operation}"}},
        operation,
    )


class DeniedStore:
    """Every store call fails as DynamoDB does for a role that lacks the grant."""

    shards = SHARDS

    def __init__(self, clock: ManualClock, call_ms: int = 0) -> None:
        self.clock = clock
        self.call_ms = call_ms  # how long each failing call takes (timeouts, botocore retries)
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        def denied(*args: object, **kwargs: object) -> None:
            self.calls += 1
            self.clock.advance(self.call_ms)
            raise access_denied(name)

        return denied


class ShardFailures:
    """A real store whose due-index reads fail for the shards in ``failing`` (a partial failure)."""

    def __init__(self, store: Any, failing: set[int]) -> None:
        self._store = store
        self.failing = failing

    def due_jobs(self, shard: int, *args: Any, **kwargs: Any) -> Any:
        if shard in self.failing:
            raise access_denied("Query")
        return self._store.due_jobs(shard, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class SimulatedSeconds(threading.Event):
    """A stop event whose waits advance the manual clock instead of sleeping: one tick per second."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self.clock = clock

    def wait(self, timeout: float | None = None) -> bool:
        self.clock.advance(int((timeout or 0) * 1000))
        return self.is_set()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def embedded(tmp_path: Path, clock: ManualClock) -> Any:
    engine = EmbeddedEngine(tmp_path / "punctual.db", shards=SHARDS, clock=clock)
    yield engine
    engine.close()


def _scheduler(engine: Any, clock: ManualClock, **options: Any) -> Scheduler:
    return Scheduler(engine, clock, metrics=m.InMemoryMetrics(), options=SchedulerOptions(**options), owner="s-0")


def _metrics(scheduler: Scheduler) -> m.InMemoryMetrics:
    assert isinstance(scheduler.metrics, m.InMemoryMetrics)
    return scheduler.metrics


# -- the outcome of a tick, and counting them ------------------------------------------------------


def test_a_tick_is_ok_partial_or_failed_by_what_its_claims_did() -> None:
    assert TickOutcome.of(ClaimStats()) is TickOutcome.OK  # owns no shard: nothing to do is not a failure
    assert TickOutcome.of(ClaimStats(pages=4)) is TickOutcome.OK
    assert TickOutcome.of(ClaimStats(pages=3, failed=1)) is TickOutcome.PARTIAL
    assert TickOutcome.of(ClaimStats(failed=4)) is TickOutcome.FAILED


def test_health_gives_up_only_on_ticks_that_achieved_nothing() -> None:
    health = TickHealth(give_up_after=3)
    for outcome in (TickOutcome.PARTIAL, TickOutcome.FAILED, TickOutcome.FAILED, TickOutcome.PARTIAL):
        health.record(outcome)
    assert (health.failed_in_a_row, health.nothing_in_a_row, health.exhausted) == (4, 0, False)
    for _ in range(3):
        health.record(TickOutcome.FAILED)
    assert (health.failed_in_a_row, health.nothing_in_a_row, health.exhausted) == (7, 3, True)
    health.record(TickOutcome.OK)
    assert (health.failed_in_a_row, health.nothing_in_a_row, health.exhausted) == (0, 0, False)
    assert not TickHealth(give_up_after=0, nothing_in_a_row=10**6).exhausted  # 0: never give up


def test_claim_stats_add_counts_and_keep_the_worst_lag() -> None:
    total = ClaimStats()
    total.add(ClaimStats(pages=1, due=2, lag_ms=4_000))
    total.add(ClaimStats(pages=1, failed=1, lag_ms=1_000))
    assert (total.pages, total.due, total.failed, total.lag_ms) == (2, 2, 1, 4_000)


def test_the_limit_comes_from_the_settings() -> None:
    assert options_from_settings(Settings()).max_failed_ticks == 30 == SchedulerOptions().max_failed_ticks
    assert options_from_settings(Settings(scheduler_max_failed_ticks=0)).max_failed_ticks == 0


# -- a scheduler whose every tick fails -------------------------------------------------------------------


def test_a_scheduler_whose_every_call_is_denied_gives_up_after_n_ticks(clock: ManualClock) -> None:
    # Given a store that denies every call (a role without the grant)
    store = DeniedStore(clock)
    scheduler = _scheduler(SimpleNamespace(store=store, queue=None), clock, max_failed_ticks=5)
    flushes: list[int] = []
    # When its loop runs with no deadline and nobody stops it
    with pytest.raises(SchedulerFailing, match="gave up") as failing:
        scheduler.run(SimulatedSeconds(clock), after_tick=lambda: flushes.append(clock.now_ms()))
    # Then it gave up after exactly 5 ticks, with the denial as the cause
    assert isinstance(failing.value.__cause__, ClientError)
    assert len(flushes) == 5  # the metrics of every tick were flushed, the last one before raising
    metrics = _metrics(scheduler)
    assert metrics.counters[m.SCHEDULER_TICK_FAILURES] == 5
    assert metrics.gauges[m.SCHEDULER_FAILED_TICKS_IN_A_ROW] == 5
    # and it measured no claim lag and no ownership: silence, which their alarms treat as breaching
    assert m.CLAIM_LAG_MS not in metrics.gauges and m.SHARDS_OWNED not in metrics.gauges


def test_ticks_that_fail_slowly_fail_the_invocation_at_its_deadline(clock: ManualClock) -> None:
    # Given a store whose every call takes 20 s to fail (timeouts retried inside botocore)
    store = DeniedStore(clock, call_ms=20_000)
    scheduler = _scheduler(SimpleNamespace(store=store, queue=None), clock, max_failed_ticks=30)
    # When an invocation with a 65 s deadline runs: far fewer than 30 ticks fit
    with pytest.raises(SchedulerFailing, match="no tick succeeded before the deadline"):
        scheduler.run(SimulatedSeconds(clock), until_ms=START + 65_000, release_on_stop=False)
    assert _metrics(scheduler).counters[m.SCHEDULER_TICK_FAILURES] == 4


def test_without_a_limit_the_loop_never_gives_up(clock: ManualClock) -> None:
    scheduler = _scheduler(SimpleNamespace(store=DeniedStore(clock), queue=None), clock, max_failed_ticks=0)
    stop = SimulatedSeconds(clock)
    scheduler.run(stop, after_tick=lambda: stop.set() if clock.now_ms() >= START + 100_000 else None)
    assert _metrics(scheduler).gauges[m.SCHEDULER_FAILED_TICKS_IN_A_ROW] > 100


def test_a_scheduler_that_gives_up_hands_its_shards_back(embedded: Engine, clock: ManualClock) -> None:
    # Given a scheduler that owns every shard, then loses its access to the jobs' due index
    view = SimpleNamespace(store=ShardFailures(embedded.store, set()), queue=embedded.queue)
    scheduler = _scheduler(view, clock, max_failed_ticks=3)
    scheduler.tick()
    assert len(embedded.store.shard_leases()) == SHARDS
    view.store.failing = set(range(SHARDS))
    # When its loop gives up, even though it was told to keep its leases (the Lambda is)
    with pytest.raises(SchedulerFailing):
        scheduler.run(SimulatedSeconds(clock), release_on_stop=False)
    # Then the leases are released: a healthy instance takes the shards at once
    assert all(lease.expires_at <= clock.now_ms() for lease in embedded.store.shard_leases())


# -- partial failures and recovery ------------------------------------------------------------------------


def test_a_partial_failure_is_counted_and_alarmed_but_the_healthy_shards_go_on(
    embedded: Engine, clock: ManualClock
) -> None:
    # Given one shard whose claims always fail, the others healthy
    view = SimpleNamespace(store=ShardFailures(embedded.store, {0}), queue=embedded.queue)
    scheduler = _scheduler(view, clock, max_failed_ticks=3)
    # When the loop runs for 20 ticks: far past the limit
    scheduler.run(SimulatedSeconds(clock), until_ms=START + 20_000)
    # Then it never gave up, and every tick was counted as failed
    metrics = _metrics(scheduler)
    assert metrics.counters[m.SCHEDULER_TICK_FAILURES] == 20
    assert metrics.gauges[m.SCHEDULER_FAILED_TICKS_IN_A_ROW] == 20
    assert metrics.gauges[m.CLAIM_LAG_MS] == 0  # the healthy shards were read: nothing waits there


def test_one_good_tick_resets_the_count(embedded: Engine, clock: ManualClock) -> None:
    view = SimpleNamespace(store=ShardFailures(embedded.store, set(range(SHARDS))), queue=embedded.queue)
    scheduler = _scheduler(view, clock, max_failed_ticks=5)
    stop = SimulatedSeconds(clock)

    def heal_after_four() -> None:
        metrics = _metrics(scheduler)
        if metrics.counters[m.SCHEDULER_TICK_FAILURES] == 4:
            view.store.failing = set()
        if clock.now_ms() >= START + 10_000:
            stop.set()

    scheduler.run(stop, after_tick=heal_after_four)
    metrics = _metrics(scheduler)
    assert metrics.counters[m.SCHEDULER_TICK_FAILURES] == 4
    assert metrics.gauges[m.SCHEDULER_FAILED_TICKS_IN_A_ROW] == 0


# -- what a healthy tick reports ---------------------------------------------------------------------------


def test_shards_owned_is_reported_once_per_window_whatever_the_tick_rate(embedded: Engine, clock: ManualClock) -> None:
    reported: list[float] = []

    class Recording(m.InMemoryMetrics):
        def gauge(self, name: str, value: float) -> None:
            if name == m.SHARDS_OWNED:
                reported.append(value)
            super().gauge(name, value)

    clock.set(START // SHARDS_OWNED_EVERY_MS * SHARDS_OWNED_EVERY_MS - 250)  # just before a window
    scheduler = Scheduler(embedded, clock, metrics=Recording(), owner="s-0")
    scheduler.tick()  # it started within that window: it reports none for it (it held nothing as it began)
    clock.advance(250)
    for _ in range(240):  # one minute of ticks, 4 a second
        scheduler.tick()
        clock.advance(250)
    assert reported == [SHARDS] * (60_000 // SHARDS_OWNED_EVERY_MS)


# -- the Lambda's hand-over: a normal stop, never a failure ------------------------------------------------

PREDECESSOR, SUCCESSOR = "scheduler-0@100", "scheduler-0@101"


def _successor_after(ticks: int, engine: Engine, clock: ManualClock, flushes: list[int]) -> Any:
    """An ``after_tick`` that counts the ticks, and lets the successor take the shards over after ``ticks``."""
    successor = Scheduler(engine, clock, metrics=m.InMemoryMetrics(), owner=SUCCESSOR)

    def after_tick() -> None:
        flushes.append(clock.now_ms())
        if len(flushes) == ticks:
            successor.tick()

    return after_tick


def test_a_hand_over_is_a_normal_stop(embedded: Engine, clock: ManualClock) -> None:
    # Given a healthy invocation whose successor takes the shards over after its 4th tick
    scheduler = Scheduler(embedded, clock, metrics=m.InMemoryMetrics(), owner=PREDECESSOR)
    flushes: list[int] = []
    after_tick = _successor_after(4, embedded, clock, flushes)
    # When it runs with a deadline far off
    scheduler.run(SimulatedSeconds(clock), until_ms=START + 100_000, after_tick=after_tick)
    # Then it stopped at its next lease refresh, without raising, and counted no failed tick
    assert scheduler.ownership.handed_over and len(flushes) <= 4 + 3
    metrics = _metrics(scheduler)
    assert m.SCHEDULER_TICK_FAILURES not in metrics.counters
    assert metrics.gauges[m.SCHEDULER_FAILED_TICKS_IN_A_ROW] == 0
    # and the successor's leases are left alone
    assert {(lease.owner, lease.expires_at > clock.now_ms()) for lease in embedded.store.shard_leases()} == {
        (SUCCESSOR, True)
    }


def test_an_invocation_whose_every_tick_failed_still_fails_when_relieved(embedded: Engine, clock: ManualClock) -> None:
    # Given an invocation whose claims all fail slowly (fewer ticks than the limit before the hand-over)
    view = SimpleNamespace(store=ShardFailures(embedded.store, set(range(SHARDS))), queue=embedded.queue)
    scheduler = Scheduler(view, clock, metrics=m.InMemoryMetrics(), owner=PREDECESSOR)  # type: ignore[arg-type]
    flushes: list[int] = []
    after_tick = _successor_after(3, embedded, clock, flushes)
    # When its successor takes over: its ticks achieved nothing, which a hand-over must not hide
    with pytest.raises(SchedulerFailing, match="no tick succeeded before its successor took over"):
        scheduler.run(SimulatedSeconds(clock), until_ms=START + 100_000, after_tick=after_tick)
    # Then only its own ticks counted as failed, not the one that found the successor
    assert _metrics(scheduler).counters[m.SCHEDULER_TICK_FAILURES] == len(flushes) - 1


def test_a_failed_release_at_the_hand_over_fails_no_tick(embedded: Engine, clock: ManualClock) -> None:
    class NoRelease(ShardFailures):
        def release_shard(self, lease: Any) -> None:
            raise access_denied("UpdateItem")

    view = SimpleNamespace(store=NoRelease(embedded.store, set()), queue=embedded.queue)
    scheduler = Scheduler(view, clock, metrics=m.InMemoryMetrics(), owner=PREDECESSOR)  # type: ignore[arg-type]
    scheduler.tick()
    assert embedded.store.acquire_shard(0, SUCCESSOR, clock.now_ms(), 10_000) is not None  # its first take-over
    clock.advance(RENEW_MS)
    # When its next refresh finds the successor, and giving up the other three leases fails
    assert scheduler.tick() == ClaimStats()  # Then the tick does not fail: it found its successor and stopped
    assert scheduler.ownership.handed_over and scheduler.ownership.refresh(clock.now_ms(), force=True) == []


# -- a failed lease refresh ----------------------------------------------------------------------------------


def test_a_failed_lease_refresh_is_retried_at_the_next_tick(embedded: Engine, clock: ManualClock) -> None:
    class LeasesDown(ShardFailures):
        down = True

        def shard_leases(self) -> Any:
            if self.down:
                raise access_denied("Query")
            return self._store.shard_leases()

    view = SimpleNamespace(store=LeasesDown(embedded.store, set()), queue=embedded.queue)
    scheduler = _scheduler(view, clock)
    with pytest.raises(ClientError):
        scheduler.tick()
    view.store.down = False
    clock.advance(SchedulerOptions().tick_ms)  # one tick later: well within renew_every_ms
    scheduler.tick()
    assert scheduler.ownership.shards == list(range(SHARDS))  # not a tick that owns nothing and looks healthy


# -- the long-running process -------------------------------------------------------------------------------


def test_punctual_scheduler_exits_1_when_its_loop_gives_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from punctual.cli import main
    from punctual.cli import scheduler as command

    def gives_up(self: Scheduler, stop: threading.Event, **kwargs: object) -> ClaimStats:
        raise SchedulerFailing("scheduler gave up: 30 ticks in a row claimed nothing")

    monkeypatch.setattr(Scheduler, "run", gives_up)
    monkeypatch.setattr(command, "collect_rarely", lambda: None)  # process-wide GC settings: not in tests
    monkeypatch.setattr(command, "stop_event_on_signals", threading.Event)  # nor pytest's signal handlers
    assert main(["scheduler", "--data-dir", str(tmp_path)]) == 1
    assert any(r.levelname == "ERROR" and "exiting with status 1" in r.getMessage() for r in caplog.records)
