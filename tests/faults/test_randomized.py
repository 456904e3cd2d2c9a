"""The randomized fault tier (issue 10): seeded scenarios on both engines, each injecting faults at
random steps into the real scheduler, workers and reaper, then checking the invariants
(``tests/faults/chaos.py``). CI runs at least 500 fault points per engine; ``--soak`` runs 10x.

Reproduce one scenario: ``PUNCTUAL_FAULT_SEED=17 pytest tests/faults/test_randomized.py -k embedded``.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from punctual.clock import ManualClock
from punctual.config import EngineKind, Settings
from punctual.port import Engine
from tests.conftest import START_MS
from tests.faults.chaos import Simulation, check_invariants, quiet_logs

pytestmark = pytest.mark.faults

CI_POINTS = 500  # fault points per engine in CI
SOAK_FACTOR = 10


def _seeds(request: pytest.FixtureRequest) -> Iterator[int]:
    if os.environ.get("PUNCTUAL_FAULT_SEED"):
        yield int(os.environ["PUNCTUAL_FAULT_SEED"])
        return
    seed = 0
    while True:
        yield seed
        seed += 1


def _target(request: pytest.FixtureRequest) -> int:
    if os.environ.get("PUNCTUAL_FAULT_SEED"):
        return 0  # one scenario, whatever it injects
    return CI_POINTS * (SOAK_FACTOR if request.config.getoption("--soak") else 1)


def _campaign(
    request: pytest.FixtureRequest, make: Callable[[int, ManualClock], tuple[Engine, Callable[[], None]]], **sizes: Any
) -> None:
    quiet_logs()
    target, points, scenarios, kinds = _target(request), 0, 0, Counter[str]()
    started = time.monotonic()
    for seed in _seeds(request):
        clock = ManualClock(START_MS + seed * 3_600_000)
        engine, close = make(seed, clock)
        try:
            sim = Simulation(engine, clock, seed, **sizes)
            outcome = sim.run()
            check_invariants(sim)
        finally:
            close()
        points += outcome.fault_points
        kinds.update(outcome.injected)
        scenarios += 1
        if points >= target:
            break
    elapsed = time.monotonic() - started
    print(f"\n{scenarios} scenarios, {points} fault points in {elapsed:.1f} s: {dict(sorted(kinds.items()))}")
    assert points >= target


def test_randomized_faults_embedded(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    from punctual.engines.embedded import EmbeddedEngine

    def make(seed: int, clock: ManualClock) -> tuple[Engine, Callable[[], None]]:
        engine = EmbeddedEngine(tmp_path / f"chaos-{seed}.db", shards=4, clock=clock)
        return engine, engine.close

    _campaign(request, make, rate=0.1, jobs=9, fault_s=240)


@pytest.fixture
def moto_on_manual_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[ManualClock], None]]:
    """moto's SQS keeps delays and visibility on real time: put it on the scenario's manual clock."""
    from moto import mock_aws
    from moto.sqs import models as sqs_models

    def use(clock: ManualClock) -> None:
        monkeypatch.setattr(sqs_models, "unix_time", lambda *_: clock.now_ms() / 1000)
        monkeypatch.setattr(sqs_models, "unix_time_millis", lambda *_: float(clock.now_ms()))

    with mock_aws():
        yield use


def test_randomized_faults_aws(
    request: pytest.FixtureRequest, moto_on_manual_time: Callable[[ManualClock], None]
) -> None:
    from punctual.engines.aws import AwsEngine
    from punctual.engines.aws.bootstrap import ensure_resources

    def make(seed: int, clock: ManualClock) -> tuple[Engine, Callable[[], None]]:
        moto_on_manual_time(clock)
        settings = Settings(engine=EngineKind.AWS, shards=4, open_shards=2, name_prefix=f"chaos{seed}")
        engine = AwsEngine(ensure_resources(settings), clock=clock, serialize=True)
        return engine, engine.close

    _campaign(request, make, rate=0.35, jobs=6, fault_s=150, max_step_s=5, turns=2)
