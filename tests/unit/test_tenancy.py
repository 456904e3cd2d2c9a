"""Tenancy rules without a store: round-robin hand-out, effective limits, the API bucket (the rate rule:
test_tenant_rates.py)."""

from __future__ import annotations

import pytest

from punctual import ids
from punctual.clock import ManualClock
from punctual.config import Settings
from punctual.engines.embedded import EmbeddedEngine
from punctual.errors import TooManyRequests
from punctual.port import Dispatch, Tenant
from punctual.tenancy.api_rate import ApiRateLimiter
from punctual.tenancy.fairness import RoundRobin
from punctual.tenancy.limits import LimitCache, Limits, defaults_from, effective

pytestmark = pytest.mark.unit


def _queues(backlog: dict[str, int]) -> dict[str, list[str]]:
    return {g: [f"{g}{i}" for i in range(n)] for g, n in backlog.items()}


def _fetcher(queues: dict[str, list[str]]):  # type: ignore[no-untyped-def]
    def fetch(group: str, n: int) -> list[str]:
        taken, queues[group] = queues[group][:n], queues[group][n:]
        return taken

    return fetch


def test_round_robin_alternates_owners_one_receive_at_a_time() -> None:
    queues = _queues({"a": 100, "b": 3})
    fetch, turns = _fetcher(queues), RoundRobin()
    order = [turns.pick(["a", "b"], 1, fetch)[0] for _ in range(8)]
    assert order == ["a0", "b0", "a1", "b1", "a2", "b2", "a3", "a4"]


def test_round_robin_is_weighted_and_fills_a_batch_across_owners() -> None:
    queues = _queues({"a": 100, "b": 100, "c": 1})
    picked = RoundRobin().pick(["a", "b", "c"], 8, _fetcher(queues), {"b": 3})
    assert picked == ["a0", "b0", "b1", "b2", "c0", "a1", "b3", "b4"]


def test_round_robin_remembers_a_turn_across_picks() -> None:
    queues = _queues({"a": 10, "b": 10})
    fetch, turns = _fetcher(queues), RoundRobin()
    assert turns.pick(["a", "b"], 1, fetch, {"a": 2}) == ["a0"]
    assert turns.pick(["a", "b"], 1, fetch, {"a": 2}) == ["a1"]  # a's turn of 2 goes on
    assert turns.pick(["a", "b"], 1, fetch, {"a": 2}) == ["b0"]
    assert turns.pick(["a", "b"], 3, fetch, {"a": 2}) == ["a2", "a3", "b1"]
    assert turns.pick([], 3, fetch) == [] and turns.pick(["a"], 0, fetch) == []


def test_one_owner_alone_keeps_its_turn_position_for_when_others_arrive() -> None:
    # Given owner a (weight 3) alone for five items (one planned step, not one per item)
    queues = _queues({"a": 20, "b": 20})
    fetch, turns = _fetcher(queues), RoundRobin()
    assert turns.pick(["a"], 5, fetch, {"a": 3}) == ["a0", "a1", "a2", "a3", "a4"]
    # Then its second turn has one item left when b arrives, as if they were picked one by one
    assert turns.pick(["a", "b"], 4, fetch, {"a": 3}) == ["a5", "b0", "a6", "a7"]
    one_by_one, single = _fetcher(_queues({"a": 20, "b": 20})), RoundRobin()
    picked = [single.pick(["a"], 1, one_by_one, {"a": 3})[0] for _ in range(5)]
    picked += [single.pick(["a", "b"], 1, one_by_one, {"a": 3})[0] for _ in range(4)]
    assert picked == ["a0", "a1", "a2", "a3", "a4", "a5", "b0", "a6", "a7"]


def test_the_embedded_queue_hands_out_round_robin_across_owners(tmp_path) -> None:  # type: ignore[no-untyped-def]
    clock = ManualClock()
    engine = EmbeddedEngine(tmp_path / "q.db", shards=1, clock=clock)
    try:
        now = clock.now_ms()
        flood = [Dispatch(ids.run_id_for(ids.new_job_id(), now), now, group="a") for _ in range(50)]
        few = [Dispatch(ids.run_id_for(ids.new_job_id(), now), now, group="b") for _ in range(3)]
        engine.queue.send(flood)  # a's backlog is older than b's runs
        engine.queue.send(few)
        owners = {d.run_id: d.group for d in [*flood, *few]}
        handed = [owners[engine.queue.receive(1, 60)[0].run_id] for _ in range(8)]
        assert handed[:6] == ["a", "b", "a", "b", "a", "b"]
        # weights come from the tenant records
        engine.store.put_tenant(Tenant(owner="a", weight=3))
        engine.queue.send([Dispatch(ids.run_id_for(ids.new_job_id(), now), now, group="c") for _ in range(10)])
        clock.advance(10_000)  # past the weights' cache; the in-flight messages come back too
        batch = [owners.get(d.run_id, "c") for d in engine.queue.receive(8, 600)]
        assert sorted(batch) == sorted(["a", "a", "a", "c", "a", "a", "a", "c"])
    finally:
        engine.close()


def test_effective_limits_take_the_record_over_the_defaults() -> None:
    defaults = defaults_from(Settings(tenant_max_jobs=100, tenant_api_requests_per_second=10))
    assert defaults == Limits(max_jobs=100, api_requests_per_second=10)
    record = Tenant(owner="a", max_jobs=5, max_concurrency=2, weight=4)
    assert effective(record, defaults) == Limits(max_jobs=5, max_concurrency=2, api_requests_per_second=10, weight=4)
    assert effective(None, defaults) == defaults
    assert Settings(admin_principals=" ops , arn:aws:iam::1:role/x,").admins == {"ops", "arn:aws:iam::1:role/x"}


class _Store:
    def __init__(self, tenant: Tenant | None) -> None:
        self.tenant, self.reads = tenant, 0

    def get_tenant(self, owner: str) -> Tenant | None:
        self.reads += 1
        return self.tenant


def test_limits_are_cached_per_owner_for_a_while() -> None:
    clock, store = ManualClock(), _Store(Tenant(owner="a", max_concurrency=3))
    cache = LimitCache(store, Limits(), clock, ttl_ms=1000)  # type: ignore[arg-type]
    assert cache.get("a").max_concurrency == 3 and cache.get("a").max_concurrency == 3
    assert store.reads == 1
    clock.advance(1000)
    cache.get("a")
    assert store.reads == 2


def test_the_api_bucket_allows_the_rate_then_refuses_with_retry_after() -> None:
    clock = ManualClock()
    cache = LimitCache(_Store(Tenant(owner="a", api_requests_per_second=2)), Limits(), clock)  # type: ignore[arg-type]
    limiter = ApiRateLimiter(cache, clock)
    limiter.check("a")
    limiter.check("a")
    with pytest.raises(TooManyRequests) as refused:
        limiter.check("a")
    assert refused.value.retry_after_s == 1
    clock.advance(500)  # one token back
    limiter.check("a")
    with pytest.raises(TooManyRequests):
        limiter.check("a")
