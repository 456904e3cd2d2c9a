"""One place assembles the runtime (``punctual.runtime.assembly``): what each component gets from Settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from punctual.clock import ManualClock
from punctual.config import Settings
from punctual.engines.embedded import EmbeddedEngine
from punctual.metrics import InMemoryMetrics
from punctual.runs.alerts import LogAlerter, SnsAlerter
from punctual.runtime.assembly import Runtime

pytestmark = pytest.mark.unit

TOPIC = "arn:aws:sns:us-east-1:123456789012:alerts"


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Runtime:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")  # the SNS client is made, never called
    settings = Settings(data_dir=str(tmp_path), alert_topic_arn=TOPIC, lease_margin_s=7, dispatch_visibility_s=45)
    clock = ManualClock()
    rt = Runtime(settings, EmbeddedEngine.from_settings(settings, clock=clock), clock)
    yield rt
    rt.close()


def test_the_long_running_worker_gets_the_sns_alerter_and_the_settings(runtime: Runtime) -> None:
    # the Fargate task runs `punctual worker`: with a topic configured, alerts go to SNS, not the log
    worker = runtime.worker()
    assert isinstance(worker.port.alerter, SnsAlerter)
    assert worker.options.lease_margin_s == 7 and worker.options.visibility_s == 45
    assert runtime.worker(visibility_s=60).options.visibility_s == 60
    lambda_worker = runtime.lambda_worker()
    assert isinstance(lambda_worker.alerter, SnsAlerter) and lambda_worker.options.visibility_s == 45
    assert isinstance(runtime.reaper().alerter, SnsAlerter)


def test_without_a_topic_alerts_are_logged(tmp_path: Path) -> None:
    settings = Settings(data_dir=str(tmp_path))
    clock = ManualClock()
    runtime = Runtime(settings, EmbeddedEngine.from_settings(settings, clock=clock), clock)
    try:
        assert isinstance(runtime.worker().port.alerter, LogAlerter)
    finally:
        runtime.close()


def test_flags_only_widen_the_target_policy(runtime: Runtime) -> None:
    assert not runtime.target_policy().allow_loopback
    assert runtime.target_policy(allow_loopback=True).allow_loopback


def test_the_scheduler_reads_the_skew_clock_from_the_engine_port(runtime: Runtime) -> None:
    assert runtime.engine.clock_skew is None  # SQLite shares our clock
    scheduler = runtime.scheduler(metrics=InMemoryMetrics(), instance=1, instances=3)
    assert scheduler.clock.source is None and scheduler.clock.skew() == 0


class _MeasuredSkew:
    skew_ms = 4_000  # the service's clock is 4 s ahead of this host's


def test_workers_and_the_reaper_decide_when_by_the_corrected_clock(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an engine that measured the service's clock 4 s ahead of this host's (as the aws engine
    # does from response Date headers)
    monkeypatch.setattr(type(runtime.engine), "clock_skew", property(lambda _: _MeasuredSkew()))
    local = runtime.clock.now_ms()
    # Then every component that decides when (a call's instant, a lease's expiry) reads the
    # corrected clock: a worker on a host 4 s behind neither calls late nor takes over early
    assert runtime.worker().clock.now_ms() == local + 4_000
    assert runtime.worker().port.clock.now_ms() == local + 4_000
    assert runtime.lambda_worker().clock.now_ms() == local + 4_000
    assert runtime.reaper().clock.now_ms() == local + 4_000
