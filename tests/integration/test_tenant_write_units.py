"""Write units the tenant limits add to one run on the aws engine, counted on moto with the
WriteMeter of test_aws_engine (request count, units from DynamoDB's published rules).

Owners without limits: 0. With max_concurrency: take + release of a slot, 1 unit each while the
owner's slot item is under 1 KB. With max_runs_per_minute: 1 unit per start (the owner's rate
record, read then replaced by compare-and-set). A refused try (the run waits) writes the run's turn
into the same record: 1 unit (plus the run's note, once per wait).
"""

from __future__ import annotations

import random

import pytest

from punctual.clock import ManualClock
from punctual.engines.aws import AwsEngine
from punctual.port import LeaseOutcome, SlotOutcome, Tenant
from punctual.tenancy.admission import Gate
from punctual.tenancy.limits import UNLIMITED, LimitCache
from tests.integration import test_aws_engine as aws
from tests.integration.test_aws_engine import WriteMeter

pytestmark = pytest.mark.integration

clock, engine, moto = aws.clock, aws.engine, aws.moto  # the aws engine on moto (fixtures)


def _one_start(gate: Gate, owner: str, run_id: str, now: int) -> None:
    """What the lease path does around one run's lease and finish (without the run's own writes)."""
    admission = gate.admit(owner, run_id, now)
    assert admission.admitted
    gate.settle(admission, LeaseOutcome.LEASED)
    gate.release(owner, run_id)


@pytest.mark.parametrize(
    ("limits", "requests", "units"),
    [
        ({}, 0, 0),
        ({"max_jobs": 10, "api_requests_per_second": 5}, 0, 0),
        ({"max_concurrency": 5}, 2, 2),
        ({"max_runs_per_minute": 600}, 1, 1),
        ({"max_concurrency": 5, "max_runs_per_minute": 600}, 3, 3),
    ],
    ids=["unlimited", "limits-off-the-lease-path", "max_concurrency", "max_runs_per_minute", "both"],
)
def test_extra_write_units_per_run(engine: AwsEngine, clock: ManualClock, limits: dict, requests: int, units: int):  # type: ignore[type-arg]
    store = engine.store
    if limits:
        store.put_tenant(Tenant(owner="owner", **limits))
    gate = Gate(store, LimitCache(store, UNLIMITED, clock), clock, rng=random.Random(1))
    _one_start(gate, "owner", "run_warm_1", clock.now_ms())  # the owner's slot item exists from its first run on
    clock.advance(1000)
    meter = WriteMeter(engine)
    with meter.phase("run"):
        _one_start(gate, "owner", "run_measured_1", clock.now_ms())
    meter.close()
    assert meter.requests.get("run", 0) == requests
    assert meter.units.get("run", 0) == units


def test_a_slot_costs_one_unit_while_the_owner_has_up_to_18_runs_holding_slots(engine: AwsEngine, clock: ManualClock):
    # Each holder is a run id (~50 characters) and a number in the owner's slot item: the item, and
    # so every take and release, stays under 1 KB (one unit) up to 18 holders, then costs 2 up to ~37.
    store, now = engine.store, clock.now_ms()
    costs = []
    for i in range(20):
        meter = WriteMeter(engine)
        with meter.phase("take"):
            assert store.take_slot("an-owner", f"run_{'f' * 32}_{now + i}", 100, now) is SlotOutcome.TAKEN
        meter.close()
        costs.append(meter.units["take"])
    assert costs[0] == 3  # an owner's very first slot: the refused update, creating the item, the take
    assert costs[1:18] == [1] * 17
    assert costs[18:] == [2, 2]  # the 19th holder's take is the first to cost 2
