"""A batch of leases on DynamoDB is one conditional write per run: one can fail (a throttle) while the
others commit. The committed ones began their attempts and must reach their calls (contract (a)):
before the fix the whole batch raised, the worker called none of them, and each came back only as a
takeover of a lost attempt (with ``max_retries: 0``, dead without a call)."""

from __future__ import annotations

from typing import Any

import pytest

from punctual.errors import Throttled
from punctual.model import RunState
from punctual.port import Engine, LeaseOutcome, LeaseRequest
from tests.contract.factories import SECOND, make_job, make_run

pytestmark = pytest.mark.integration

LEASE = 30 * SECOND


def test_a_failed_lease_in_a_batch_leaves_the_others_leased(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    from punctual.clock import ManualClock

    # Given three runs due now
    store: Any = engine.store
    clock = ManualClock()
    at = clock.now_ms()
    jobs = [make_job("owner-batch", clock, shards=4) for _ in range(3)]
    for job in jobs:
        store.create_job(job)
    store.insert_runs([make_run(job, at, clock) for job in jobs])
    # When they are leased in one batch and the write of the second one is throttled
    tables = store._tables
    update = tables.update
    throttled_key = None

    def flaky(table: str, key: dict[str, Any], request: dict[str, Any], **kwargs: Any) -> Any:
        nonlocal throttled_key
        if table == store.runs_table and jobs[1].id in str(key):
            throttled_key = key
            raise Throttled("UpdateItem throttled (injected)")
        return update(table, key, request, **kwargs)

    monkeypatch.setattr(tables, "update", flaky)
    results = store.lease_runs([LeaseRequest(job.id, at, LEASE) for job in jobs], "w1", at)

    # Then the two that were written are reported leased (the worker calls them), the throttled
    # one as not leased now (its message comes back), and the store agrees
    assert throttled_key is not None
    assert [r.outcome for r in results] == [LeaseOutcome.LEASED, LeaseOutcome.HELD, LeaseOutcome.LEASED]
    assert results[1].run is None
    states = [store.get_run(job.id, at).state for job in jobs]
    assert states == [RunState.RUNNING, RunState.SCHEDULED, RunState.RUNNING]


def test_a_batch_whose_every_lease_failed_raises(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    from punctual.clock import ManualClock

    store: Any = engine.store
    clock = ManualClock()
    at = clock.now_ms()
    jobs = [make_job("owner-batch", clock, shards=4) for _ in range(2)]
    for job in jobs:
        store.create_job(job)
    store.insert_runs([make_run(job, at, clock) for job in jobs])

    def throttled(*args: Any, **kwargs: Any) -> Any:
        raise Throttled("UpdateItem throttled (injected)")

    monkeypatch.setattr(store._tables, "update", throttled)
    with pytest.raises(Throttled):
        store.lease_runs([LeaseRequest(job.id, at, LEASE) for job in jobs], "w1", at)
