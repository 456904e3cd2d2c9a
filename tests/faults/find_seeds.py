"""Which seeds of the randomized tier break which invariant: the first few per invariant letter.

    .venv/bin/python -m tests.faults.find_seeds --count 300            # embedded
    .venv/bin/python -m tests.faults.find_seeds --engine aws --count 100

Used to prove that the simulation sees a bug (run it on the code before a fix, record the seed in
docs/decisions.md) and to replay one: ``PUNCTUAL_FAULT_SEED=<seed> pytest tests/faults/test_randomized.py``.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from punctual.clock import ManualClock
from punctual.port import Engine
from tests.conftest import START_MS
from tests.faults.chaos import Simulation, check_invariants, limit_scenario, quiet_logs
from tests.faults.test_randomized import LIMIT_EVERY

_LETTER = re.compile(r"\(([a-f])\)")


@contextmanager
def _embedded(seed: int, clock: ManualClock, folder: Path) -> Iterator[Engine]:
    from punctual.engines.embedded import EmbeddedEngine

    engine = EmbeddedEngine(folder / f"seed-{seed}.db", shards=4, clock=clock)
    try:
        yield engine
    finally:
        engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("embedded", "aws"), default="embedded")
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--per-letter", type=int, default=3)
    args = parser.parse_args()
    quiet_logs()
    found: dict[str, list[str]] = defaultdict(list)
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as folder:
        for seed in range(args.first, args.first + args.count):
            clock = ManualClock(START_MS + seed * 3_600_000)
            with _open(args.engine, seed, clock, Path(folder)) as engine:
                if seed % LIMIT_EVERY == LIMIT_EVERY - 1:
                    problems = limit_scenario(engine, clock, seed)
                else:
                    sim = Simulation(engine, clock, seed, **_sizes(args.engine))
                    sim.run()
                    problems = check_invariants(sim)
            for problem in problems:
                match = _LETTER.search(problem)
                letter = match.group(1) if match else "other"
                if len(found[letter]) < args.per_letter:
                    found[letter].append(problem[:300])
    for letter in sorted(found):
        print(f"== ({letter})")
        print("\n".join(found[letter]))


def _sizes(engine: str) -> dict[str, float]:
    if engine == "aws":
        return {"rate": 0.2, "jobs": 6, "fault_s": 120, "max_step_s": 5}
    return {"rate": 0.1, "jobs": 8, "fault_s": 180, "max_step_s": 2}


@contextmanager
def _open(kind: str, seed: int, clock: ManualClock, folder: Path) -> Iterator[Engine]:
    if kind == "embedded":
        with _embedded(seed, clock, folder) as engine:
            yield engine
        return
    from moto import mock_aws
    from moto.sqs import models as sqs_models

    from punctual.config import EngineKind, Settings
    from punctual.engines.aws import AwsEngine
    from punctual.engines.aws.bootstrap import ensure_resources

    sqs_models.unix_time = lambda *_: clock.now_ms() / 1000  # type: ignore[assignment]
    sqs_models.unix_time_millis = lambda *_: float(clock.now_ms())  # type: ignore[assignment]
    with mock_aws():
        settings = Settings(engine=EngineKind.AWS, shards=4, open_shards=2, name_prefix=f"chaos{seed}")
        engine = AwsEngine(ensure_resources(settings), clock=clock, serialize=True)
        try:
            yield engine
        finally:
            engine.close()


if __name__ == "__main__":
    main()
