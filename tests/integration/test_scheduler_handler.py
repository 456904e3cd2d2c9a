"""The scheduler Lambda handler on moto: one invocation claims due jobs each second as instance i,
keeps its shard leases for the next invocation of the same instance, and refuses a bad event. An
invocation whose every call is denied fails, and its EMF metrics say why under the dimensions the
stack's alarms watch."""

from __future__ import annotations

import json
import time
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
from punctual.scheduling.health import SchedulerFailing
from tests.integration.conftest import ENV, Context, load

pytestmark = pytest.mark.integration


class ShortContext(Context):
    def get_remaining_time_in_millis(self) -> int:
        return 6_500  # minus the 5 s safety margin: the invocation ticks for about 1.5 s


def test_an_invocation_claims_due_jobs_and_keeps_its_leases_for_the_next(engine: Engine) -> None:
    # Given two one-time jobs due now
    now = SystemClock().now_ms()
    jobs = list(bench_jobs(2, now=now, due_at=now - 1_000, shards=engine.store.shards, cron=None))
    for job in jobs:
        engine.store.create_job(job)
    handler = load("scheduler")
    # When instance 0 of 1 is invoked
    result = handler.handler({"instance": 0, "instances": 1}, ShortContext())
    # Then both runs exist and were dispatched, and the jobs completed
    assert result["dispatched"] == 2
    for job in jobs:
        assert [r.scheduled_at for r in engine.store.list_runs(job.id, RunQuery()).items] == [now - 1_000]
    # and its shard leases are kept under the instance's stable name, for the next invocation
    leases = engine.store.shard_leases()
    assert {lease.owner for lease in leases} == {"scheduler-0"}
    assert len(leases) == engine.store.shards
    epochs = {lease.shard: lease.epoch for lease in leases}
    handler.handler({"instance": 0, "instances": 1}, ShortContext())
    assert {lease.shard: lease.epoch for lease in engine.store.shard_leases()} == epochs  # renewed, not re-taken
    assert ids.shard_of(jobs[0].id, engine.store.shards) in epochs


def test_a_bad_event_is_refused_with_a_clear_error(engine: Engine) -> None:
    handler = load("scheduler")
    with pytest.raises(InvalidInput, match="instance must be < instances"):
        handler.handler({"instance": 3, "instances": 2}, ShortContext())
    assert engine.store.shard_leases() == []


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
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    handler = load("scheduler")
    handler.handler({"instance": 0, "instances": 1}, ShortContext())
    documents = _emf(capsys.readouterr().out)
    assert _values(documents, m.SHARDS_OWNED)[0] == engine.store.shards
    assert set(_values(documents, m.CLAIM_LAG_MS)) == {0}
    assert set(_values(documents, m.SCHEDULER_FAILED_TICKS_IN_A_ROW)) == {0}
    assert not _values(documents, m.SCHEDULER_TICK_FAILURES)
