"""The randomized tier: seeded scenarios on both engines, each with the user and faults at random
steps around the real scheduler, workers and reaper, checked against the run contract
(``tests/faults/chaos.py``, ``tests/faults/promises.py``). CI runs ``CI_SCENARIOS`` scenarios
per engine; ``--soak`` runs 10x.

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
from tests.faults.chaos import Simulation, check_invariants, limit_scenario, quiet_logs

pytestmark = pytest.mark.faults

LIMIT_EVERY = 5  # every fifth seed: the limits scenario (chaos.limit_scenario)
CI_SCENARIOS = int(os.environ.get("PUNCTUAL_FAULT_SCENARIOS", "2000"))
SOAK_FACTOR = 10


def _seeds(request: pytest.FixtureRequest) -> Iterator[int]:
    if os.environ.get("PUNCTUAL_FAULT_SEED"):
        yield int(os.environ["PUNCTUAL_FAULT_SEED"])
        return
    first = int(os.environ.get("PUNCTUAL_FAULT_FIRST_SEED", "0"))
    count = CI_SCENARIOS * (SOAK_FACTOR if request.config.getoption("--soak") else 1)
    yield from range(first, first + count)


def campaign(
    request: pytest.FixtureRequest, make: Callable[[int, ManualClock], tuple[Engine, Callable[[], None]]], **sizes: Any
) -> None:
    quiet_logs()
    scenarios, kinds, problems = 0, Counter[str](), []
    started = time.monotonic()
    for seed in _seeds(request):
        clock = ManualClock(START_MS + seed * 3_600_000)
        engine, close = make(seed, clock)
        try:
            if seed % LIMIT_EVERY == LIMIT_EVERY - 1:  # an owner at its limits with a backlog, no faults
                problems.extend(limit_scenario(engine, clock, seed))
                kinds["limit_scenario"] += 1
            else:
                sim = Simulation(engine, clock, seed, **sizes)
                kinds.update(sim.run().injected)
                problems.extend(check_invariants(sim))
        finally:
            close()
        scenarios += 1
    elapsed = time.monotonic() - started
    print(f"\n{scenarios} scenarios in {elapsed:.1f} s: {dict(sorted(kinds.items()))}")
    if problems:
        print("\n".join(problems[:40]))
    assert not problems, f"{len(problems)} violations of the run contract, first: {problems[0]}"


def test_randomized_embedded(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    from punctual.engines.embedded import EmbeddedEngine

    def make(seed: int, clock: ManualClock) -> tuple[Engine, Callable[[], None]]:
        path = tmp_path / f"chaos-{seed}.db"
        engine = EmbeddedEngine(path, shards=4, clock=clock)

        def close() -> None:
            engine.close()
            for suffix in ("", "-wal", "-shm", ".writers"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)

        return engine, close

    campaign(request, make, rate=0.1, jobs=8, fault_s=180, max_step_s=2)


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


def test_randomized_aws(request: pytest.FixtureRequest, moto_on_manual_time: Callable[[ManualClock], None]) -> None:
    from punctual.engines.aws import AwsEngine
    from punctual.engines.aws.bootstrap import ensure_resources

    def make(seed: int, clock: ManualClock) -> tuple[Engine, Callable[[], None]]:
        moto_on_manual_time(clock)
        settings = Settings(engine=EngineKind.AWS, shards=4, open_shards=2, name_prefix=f"chaos{seed}")
        engine = AwsEngine(ensure_resources(settings), clock=clock, serialize=True)
        return engine, engine.close

    campaign(request, make, rate=0.2, jobs=6, fault_s=120, max_step_s=5)
