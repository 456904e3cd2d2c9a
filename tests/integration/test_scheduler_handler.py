"""The scheduler Lambda handler on moto: one invocation claims due jobs each second as instance i of
its generation (the event's minute), releases its shard leases when it stops, and refuses a bad event.
An invocation whose every call is denied fails, and its EMF metrics say why under the dimensions the
stack's alarms watch; one relieved by its successor stops without failing."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.client import BaseClient
from botocore.exceptions import ClientError

from punctual import ids
from punctual import metrics as m
from punctual.bench.jobs import bench_jobs
from punctual.clock import SystemClock
from punctual.errors import InvalidInput
from punctual.port import Engine, RunQuery
from punctual.runtime.powertools import PowertoolsMetrics
from punctual.scheduling import scheduler as scheduling
from punctual.scheduling.health import SchedulerFailing
from tests.integration.conftest import ENV, Context, load

pytestmark = pytest.mark.integration


class ShortContext(Context):
    def get_remaining_time_in_millis(self) -> int:
        return 6_500  # minus the 5 s safety margin: the invocation ticks for about 1.5 s


def _event_time(minute: int) -> str:
    """EventBridge's ``time`` of a scheduled event for ``minute`` (minutes since the epoch)."""
    return datetime.fromtimestamp(minute * 60, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_an_invocation_claims_due_jobs_and_hands_its_shards_over_when_it_stops(engine: Engine) -> None:
    # Given two one-time jobs due now
    now = SystemClock().now_ms()
    jobs = list(bench_jobs(2, now=now, due_at=now - 1_000, shards=engine.store.shards, cron=None))
    for job in jobs:
        engine.store.create_job(job)
    handler = load("scheduler")
    minute = now // 60_000
    # When instance 0 of 1 is invoked for this minute (the rule's input: the event's time)
    result = handler.handler({"instance": 0, "instances": 1, "time": _event_time(minute)}, ShortContext())
    # Then both runs exist and were dispatched, and the jobs completed
    assert result["dispatched"] == 2
    for job in jobs:
        assert [r.scheduled_at for r in engine.store.list_runs(job.id, RunQuery()).items] == [now - 1_000]
    # and its shard leases, taken under the instance's name of this generation, were released when
    # it stopped with no successor: any instance may take them at once
    leases = engine.store.shard_leases()
    assert {lease.owner for lease in leases} == {f"scheduler-0@{minute}"}
    assert len(leases) == engine.store.shards
    assert all(lease.expires_at < SystemClock().now_ms() for lease in leases)
    assert ids.shard_of(jobs[0].id, engine.store.shards) in {lease.shard for lease in leases}
    # When the next minute's invocation comes, it holds them, each under a new epoch
    epochs = {lease.shard: lease.epoch for lease in leases}
    handler.handler({"instance": 0, "instances": 1, "time": _event_time(minute + 1)}, ShortContext())
    after = engine.store.shard_leases()
    assert {lease.owner for lease in after} == {f"scheduler-0@{minute + 1}"}
    assert {lease.shard: lease.epoch for lease in after} == {shard: epoch + 1 for shard, epoch in epochs.items()}


def test_a_bad_event_is_refused_with_a_clear_error(engine: Engine) -> None:
    handler = load("scheduler")
    with pytest.raises(InvalidInput, match="instance must be < instances"):
        handler.handler({"instance": 3, "instances": 2}, ShortContext())
    assert engine.store.shard_leases() == []
    with pytest.raises(InvalidInput, match="has no offset"):
        handler.handler({"instance": 0, "instances": 1, "time": "2026-12-01T12:34:00"}, ShortContext())


# -- a scheduler that keeps failing fails its invocation, and says so in its metrics ------------------


def _emf(out: str) -> list[dict[str, Any]]:
    """The EMF documents (one per flush) that Powertools printed."""
    return [json.loads(line) for line in out.splitlines() if line.startswith("{") and '"_aws"' in line]


def _values(documents: list[dict[str, Any]], name: str) -> list[float]:
    """Every value of metric ``name``, in order (Powertools writes one value or a list per document)."""
    found: list[float] = []
    for document in documents:
        value = document.get(name)
        if value is not None:
            found += value if isinstance(value, list) else [value]
    return found


def _deny_every_call(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on every AWS call fails as it does for a role without the grant."""
    denied: list[str] = []

    def access_denied(self: BaseClient, operation: str, params: dict[str, Any]) -> None:
        denied.append(operation)
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}, operation)

    monkeypatch.setattr(BaseClient, "_make_api_call", access_denied)
    return denied


class LongContext(Context):
    def get_remaining_time_in_millis(self) -> int:
        return 60_000  # far longer than the ticks the scheduler may fail before it gives up


def test_an_invocation_whose_every_call_is_denied_fails(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a scheduler function whose role lost its DynamoDB and SQS grants, set to give up after 3 ticks
    monkeypatch.setenv("PUNCTUAL_SCHEDULER_MAX_FAILED_TICKS", "3")
    handler = load("scheduler")
    handler._runtime()  # opened (the cold start) while the grants were still there
    denied = _deny_every_call(monkeypatch)
    # When the function is invoked
    started = time.monotonic()
    with pytest.raises(SchedulerFailing, match="3 ticks in a row") as failing:
        handler.handler({"instance": 0, "instances": 1}, LongContext())
    # Then the invocation fails (Lambda counts it in Errors) after 3 ticks, not at its deadline
    assert time.monotonic() - started < 10
    assert isinstance(failing.value.__cause__, ClientError)
    assert denied  # it did try: the store's calls reached botocore and were refused
    # and its metrics, flushed after each tick, counted every failure under the alarms' dimension
    documents = _emf(capsys.readouterr().out)
    assert sum(_values(documents, m.SCHEDULER_TICK_FAILURES)) == 3
    assert _values(documents, m.SCHEDULER_FAILED_TICKS_IN_A_ROW) == [1, 2, 3]
    assert not _values(documents, m.CLAIM_LAG_MS)  # nothing measured: the claim lag alarm breaches on silence
    for document in documents:
        assert document["service"] == ENV["POWERTOOLS_SERVICE_NAME"]
        (directive,) = document["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == ENV["POWERTOOLS_METRICS_NAMESPACE"]
        assert directive["Dimensions"] == [["service"]]  # exactly the alarms' dimensions (infra.constants)


def test_a_healthy_invocation_reports_ownership_lag_and_no_failures(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # ShardsOwned windows of 0.5 s, so that the 1.5 s invocation reports some: it reports none for
    # the window it started within (it held nothing as that window began)
    monkeypatch.setattr(scheduling, "SHARDS_OWNED_EVERY_MS", 500)
    handler = load("scheduler")
    handler.handler({"instance": 0, "instances": 1}, ShortContext())
    documents = _emf(capsys.readouterr().out)
    assert set(_values(documents, m.SHARDS_OWNED)) == {engine.store.shards}
    assert set(_values(documents, m.CLAIM_LAG_MS)) == {0}
    assert set(_values(documents, m.SCHEDULER_FAILED_TICKS_IN_A_ROW)) == {0}
    assert not _values(documents, m.SCHEDULER_TICK_FAILURES)


def test_an_invocation_relieved_by_its_successor_stops_without_failing(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given this minute's invocation, whose successor (the next minute's) takes every shard over
    # after its second tick (the metrics flush after each tick is where it looks in)
    handler = load("scheduler")
    minute = SystemClock().now_ms() // 60_000
    successor = f"scheduler-0@{minute + 1}"
    flushes: list[int] = []
    flush = PowertoolsMetrics.flush

    def successor_arrives(self: PowertoolsMetrics) -> None:
        flush(self)
        flushes.append(SystemClock().now_ms())
        if len(flushes) == 2:
            for shard in range(engine.store.shards):
                assert engine.store.acquire_shard(shard, successor, SystemClock().now_ms(), 10_000) is not None

    monkeypatch.setattr(PowertoolsMetrics, "flush", successor_arrives)
    # When it runs with its whole deadline ahead (second 40 of the next minute)
    started = time.monotonic()
    handler.handler({"instance": 0, "instances": 1, "time": _event_time(minute)}, LongContext())
    # Then it stopped at its next lease refresh, long before its deadline, without failing
    assert time.monotonic() - started < 10
    documents = _emf(capsys.readouterr().out)
    assert not _values(documents, m.SCHEDULER_TICK_FAILURES)
    assert set(_values(documents, m.SCHEDULER_FAILED_TICKS_IN_A_ROW)) == {0}
    # and it left the successor's leases alone
    now = SystemClock().now_ms()
    assert {(lease.owner, lease.expires_at >= now) for lease in engine.store.shard_leases()} == {(successor, True)}
