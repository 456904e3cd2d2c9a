"""Running scenarios of the simulation by seed, on either engine, in worker processes.

One scenario per seed: every ``LIMIT_EVERY``-th seed is the limits scenario
(:func:`tests.faults.chaos.limit_scenario`), every ``PRIORITY_EVERY``-th another the priority scenario
(:func:`tests.faults.chaos.priority_scenario`), the others a full :class:`~tests.faults.chaos.Simulation`
with faults and user actions. A seed replays the same scenario (job ids, faults, user actions and
clocks all come from it). :func:`run_parallel` spreads seeds over processes (one per core): each
scenario is single-threaded and independent, and the embedded ones write to a memory-backed folder.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from punctual.clock import ManualClock
from punctual.port import Engine
from tests.conftest import START_MS
from tests.faults.chaos import Simulation, check_invariants, limit_scenario, priority_scenario, quiet_logs

LIMIT_EVERY = 5  # every fifth seed: the limits scenario
PRIORITY_EVERY = 10  # every tenth seed that is not a limits scenario: the priority scenario
SIZES = {
    "embedded": {"rate": 0.1, "jobs": 8, "fault_s": 150, "max_step_s": 2},
    # moto answers ~100-200 requests a second: smaller scenarios, and fewer of them (docs/decisions/0122)
    "aws": {"rate": 0.2, "jobs": 5, "fault_s": 90, "max_step_s": 4},
}


@dataclass
class Result:
    scenarios: int = 0
    problems: list[str] = field(default_factory=list)
    injected: Counter[str] = field(default_factory=Counter)

    def add(self, other: Result) -> None:
        self.scenarios += other.scenarios
        self.problems.extend(other.problems)
        self.injected.update(other.injected)


def run_seeds(kind: str, seeds: Sequence[int]) -> Result:
    """Each seed's scenario on a fresh engine of ``kind``, one after the other."""
    quiet_logs()
    result = Result()
    with _scratch() as folder:
        for seed in seeds:
            clock = ManualClock(START_MS + seed * 3_600_000)
            with open_engine(kind, seed, clock, folder) as engine:
                if seed % LIMIT_EVERY == LIMIT_EVERY - 1:
                    result.problems.extend(limit_scenario(engine, clock, seed))
                    result.injected["limit_scenario"] += 1
                elif seed % PRIORITY_EVERY == PRIORITY_EVERY - 3:
                    result.problems.extend(priority_scenario(engine, clock, seed))
                    result.injected["priority_scenario"] += 1
                else:
                    sim = Simulation(engine, clock, seed, **SIZES[kind])  # type: ignore[arg-type]
                    result.injected.update(sim.run().injected)
                    result.problems.extend(check_invariants(sim))
            result.scenarios += 1
    return result


def run_parallel(kind: str, seeds: Sequence[int], processes: int | None = None) -> Result:
    """:func:`run_seeds` spread over ``processes`` (default: the cores), seeds dealt round-robin."""
    processes = max(1, min(processes or os.cpu_count() or 1, len(seeds)))
    if processes == 1:
        return run_seeds(kind, seeds)
    total = Result()
    with ProcessPoolExecutor(max_workers=processes) as pool:
        for part in pool.map(run_seeds, [kind] * processes, [seeds[i::processes] for i in range(processes)]):
            total.add(part)
    total.problems.sort(key=_seed_of)
    return total


def _seed_of(problem: str) -> int:
    try:
        return int(problem.split(":", 1)[0].split()[1])
    except (IndexError, ValueError):
        return -1


@contextmanager
def _scratch() -> Iterator[Path]:
    """Memory-backed where the machine has it (/dev/shm): no scenario waits on a disk flush."""
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None, prefix="punctual-chaos-") as folder:
        yield Path(folder)


@contextmanager
def open_engine(kind: str, seed: int, clock: ManualClock, folder: Path) -> Iterator[Engine]:
    if kind == "embedded":
        from punctual.engines.embedded import EmbeddedEngine

        path = folder / f"seed-{seed}.db"
        engine = EmbeddedEngine(path, shards=4, clock=clock)
        try:
            yield engine
        finally:
            engine.close()
            for suffix in ("", "-wal", "-shm", ".writers"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    from moto import mock_aws
    from moto.sqs import models as sqs_models

    from punctual.config import EngineKind, Settings
    from punctual.engines.aws import AwsEngine
    from punctual.engines.aws.bootstrap import ensure_resources

    # moto's SQS keeps delays and visibility on real time: put it on the scenario's manual clock
    real = sqs_models.unix_time, sqs_models.unix_time_millis
    sqs_models.unix_time = lambda *_: clock.now_ms() / 1000  # type: ignore[assignment]
    sqs_models.unix_time_millis = lambda *_: float(clock.now_ms())  # type: ignore[assignment]
    try:
        with mock_aws():
            settings = Settings(engine=EngineKind.AWS, shards=4, open_shards=2, name_prefix=f"chaos{seed}")
            engine = AwsEngine(ensure_resources(settings), clock=clock, serialize=True)
            try:
                yield engine
            finally:
                engine.close()
    finally:
        sqs_models.unix_time, sqs_models.unix_time_millis = real  # type: ignore[assignment]
