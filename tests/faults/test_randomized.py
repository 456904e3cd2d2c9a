"""The randomized tier: seeded scenarios on both engines, each with the user and faults at random
steps around the real scheduler, workers and reaper, checked against the run contract
(``tests/faults/chaos.py``, ``tests/faults/promises.py``), spread over the machine's cores.

CI runs ``EMBEDDED_SCENARIOS`` on the embedded engine and ``AWS_SCENARIOS`` on the aws engine
(moto is ~100x slower per request: docs/decisions/0122); ``--soak`` runs 10x as many.

Reproduce one scenario: ``PUNCTUAL_FAULT_SEED=17 pytest tests/faults/test_randomized.py -k embedded``;
find the seeds that break each invariant: ``python -m tests.faults.find_seeds``.
"""

from __future__ import annotations

import os
import time

import pytest

from tests.faults.campaign import run_parallel

pytestmark = pytest.mark.faults

EMBEDDED_SCENARIOS = 1_500  # CI time: the whole make test must stay under 30 min (decision 0161)
AWS_SCENARIOS = 40
SOAK_FACTOR = 10


def _seeds(request: pytest.FixtureRequest, count: int) -> list[int]:
    if os.environ.get("PUNCTUAL_FAULT_SEED"):
        return [int(os.environ["PUNCTUAL_FAULT_SEED"])]
    count = int(os.environ.get("PUNCTUAL_FAULT_SCENARIOS", count))
    first = int(os.environ.get("PUNCTUAL_FAULT_FIRST_SEED", "0"))
    return list(range(first, first + count * (SOAK_FACTOR if request.config.getoption("--soak") else 1)))


def _campaign(request: pytest.FixtureRequest, kind: str, count: int) -> None:
    seeds = _seeds(request, count)
    started = time.monotonic()
    result = run_parallel(kind, seeds)
    elapsed = time.monotonic() - started
    print(f"\n{kind}: {result.scenarios} scenarios in {elapsed:.1f} s: {dict(sorted(result.injected.items()))}")
    if result.problems:
        print("\n".join(result.problems[:40]))
    assert result.scenarios == len(seeds)
    assert not result.problems, f"{len(result.problems)} violations of the run contract, first: {result.problems[0]}"


@pytest.mark.timeout(1_200)  # ~4 min on a quiet 2-core machine; the default 300 s is for one test
def test_randomized_embedded(request: pytest.FixtureRequest) -> None:
    _campaign(request, "embedded", EMBEDDED_SCENARIOS)


@pytest.mark.timeout(1_200)
def test_randomized_aws(request: pytest.FixtureRequest) -> None:
    _campaign(request, "aws", AWS_SCENARIOS)
