"""Where the worker's CPU per run goes: one in-process worker over a burst, CPU per stage.

Run: ``.venv/bin/python bench/worker_stages.py [--runs 20000] [--prelease-s 0] [--profile DIR]``

``--runs`` one-time jobs are loaded into a fresh embedded file, a real scheduler dispatches them
(all due at one instant), and one :class:`~punctual.execution.worker.Worker` in this process executes
them against the no-op target (``punctual.bench.target``, another process). Each blocking batch step
(``receive``, ``hold``, ``prepare``, ``settle``, ``drop_or_hide``) and ``prebuild_all`` is wrapped
to add up its thread CPU time; ``loop+rest`` is the rest of the process's CPU (the event loop, the
HTTP calls, the glue, the collector). Printed in microseconds per run, with the collector's share
(its runs per generation): a cycle per run shows up there first.

What ``punctual bench burst`` adds on top: its workers are separate processes, it pre-leases by
default, and its CPU window opens a second before the scheduler's first possible claim (the
workers' idle polling until the messages turn visible counts). This machine's speed drifts by a
third within minutes, so compare two trees in alternating runs (``PYTHONPATH=<tree>/layers/core/python``).
``--profile DIR`` writes a cProfile of each step (profiler-inflated; use it to rank, not to add up).
The CPU of each of the worker's threads (the loop, the engine pools) is printed too, in
microseconds per run. ``--alone`` calls the blocking steps (receive, prepare, settle with an
immediate success) in a loop on one thread instead, with no worker and no HTTP: their cost without
a busy loop beside them. In one worker the same steps cost about twice as much (the GIL's
handovers, the caches; docs/decisions/0115).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import pstats
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, "layers/core/python")

from punctual import metrics as m
from punctual.bench.jobs import bench_jobs
from punctual.bench.target import noop_target
from punctual.clock import SystemClock
from punctual.config import Settings
from punctual.engines.embedded import EmbeddedEngine
from punctual.execution import batch, loop
from punctual.execution import holding as holding_module
from punctual.execution.loop import Tuning
from punctual.execution.options import ExecutionOptions
from punctual.execution.targets.policy import TargetPolicy
from punctual.execution.targets.types import succeeded
from punctual.execution.worker import Worker
from punctual.runs.alerts import LogAlerter
from punctual.runtime.process import collect_rarely
from punctual.scheduling.scheduler import Scheduler, options_from_settings

SHARDS = 16
STEPS = ("hold", "prepare", "settle", "drop_or_hide")


class StageClock:
    """Thread CPU per wrapped function, summed over threads; optional cProfile per function."""

    def __init__(self, profile: bool) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.profiles: dict[str, list[cProfile.Profile]] = defaultdict(list)
        self._profile = profile
        self._local = threading.local()

    def wrap(self, owner: Any, name: str, label: str | None = None) -> None:
        inner: Callable[..., Any] = getattr(owner, name)
        key = label or name

        def timed(*args: Any, **kwargs: Any) -> Any:
            profiler = self._profiler(key) if self._profile else None
            started = time.thread_time()
            if profiler is not None:
                profiler.enable()
            try:
                return inner(*args, **kwargs)
            finally:
                if profiler is not None:
                    profiler.disable()
                self.seconds[key] += time.thread_time() - started

        setattr(owner, name, timed)

    def _profiler(self, key: str) -> cProfile.Profile:
        mine: dict[str, cProfile.Profile] = self._local.__dict__.setdefault("profilers", {})
        if key not in mine:
            mine[key] = cProfile.Profile(time.thread_time)
            self.profiles[key].append(mine[key])
        return mine[key]


class CollectorClock:
    """The collector's thread CPU and its runs per generation (gc.callbacks)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.runs = [0, 0, 0]
        self._started = 0.0
        gc.callbacks.append(self._on_phase)

    def _on_phase(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            self.seconds += time.thread_time() - self._started
            self.runs[info["generation"]] += 1


class ThreadClock:
    """The CPU of each live thread, sampled while the worker runs (its pools' threads end with it)."""

    def __init__(self) -> None:
        self._last: dict[int, tuple[str, float]] = {}

    def sample(self) -> None:
        for thread in threading.enumerate():
            if thread.ident is not None and thread is not threading.current_thread():
                with contextlib.suppress(OSError):  # the thread ended meanwhile
                    cpu = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
                    self._last[thread.ident] = (thread.name, cpu)

    def by_group(self) -> dict[str, float]:
        """CPU seconds per thread group: the name without its pool index (``punctual-engine_3``)."""
        groups: defaultdict[str, float] = defaultdict(float)
        for name, cpu in self._last.values():
            groups[name.rsplit("_", 1)[0]] += cpu
        return dict(groups)


def loaded(count: int, prelease_s: int, tmp: str, url: str, clock: SystemClock) -> EmbeddedEngine:
    """A fresh file with ``count`` one-time jobs due at one instant, their runs dispatched by a real
    scheduler (due when this returns unless ``prelease_s``: then a second later)."""
    engine = EmbeddedEngine(Path(tmp) / "punctual.db", shards=SHARDS, clock=clock)
    now = clock.now_ms()
    due_at = (now + 3_000) // 1_000 * 1_000 + (1_000 if prelease_s else 0)
    engine.store.bulk_load_jobs(list(bench_jobs(count, now=now, due_at=due_at, shards=SHARDS, cron=None, url=url)))
    settings = Settings(prelease_s=prelease_s, lookahead_ms=5_000)
    scheduler = Scheduler(engine, clock, metrics=m.InMemoryMetrics(), options=options_from_settings(settings))
    while engine.queue.depth() < count:
        scheduler.tick()
    if not prelease_s:  # every run is due when the worker starts
        time.sleep(max(0.0, (due_at - clock.now_ms()) / 1_000) + 0.05)
    return engine


def alone(count: int) -> None:
    """The blocking steps called in a loop on this thread: no worker, no HTTP (see the docstring)."""
    collect_rarely()
    clock = SystemClock()
    with tempfile.TemporaryDirectory(prefix="punctual-stages-") as tmp:
        engine = loaded(count, 0, tmp, "http://127.0.0.1:9/unused", clock)
        port = batch.Port(
            engine.store, engine.queue, engine.finish_and_ack, clock, "w1", ExecutionOptions(), LogAlerter()
        )
        seconds: defaultdict[str, float] = defaultdict(float)
        handled = 0
        for _ in range(count):  # bounded: each pass handles a receive's worth
            if handled >= count:
                break
            started = time.thread_time()
            deliveries = engine.queue.receive(250, 60, 0.0)
            received = time.thread_time()
            prepared = batch.prepare(port, deliveries)
            leased = time.thread_time()
            at = clock.now_ms()
            batch.settle(port, [batch.Done(one, succeeded(200, ""), at, at) for one in prepared.leased])
            seconds["receive"] += received - started
            seconds["prepare"] += leased - received
            seconds["settle"] += time.thread_time() - leased
            handled += len(deliveries)
        engine.close()
    per_run = {name: round(value * 1e6 / count, 1) for name, value in seconds.items()}
    print(f"alone, us per run by step: {per_run}; total {sum(per_run.values()):.1f}")


def run(count: int, prelease_s: int, profile_dir: Path | None) -> None:
    collect_rarely()
    collector = CollectorClock()
    clock = SystemClock()
    threads = ThreadClock()
    with noop_target(0) as url, tempfile.TemporaryDirectory(prefix="punctual-stages-") as tmp:
        engine = loaded(count, prelease_s, tmp, url, clock)
        options = ExecutionOptions(prelease_s=prelease_s, max_early_ms=1_500 + prelease_s * 1_000)
        worker = Worker(
            engine,
            clock,
            policy=TargetPolicy(allow_loopback=True),
            options=options,
            tuning=Tuning(max_in_flight=10_000, wait_s=0.2),
        )
        stages = StageClock(profile=profile_dir is not None)
        for step in STEPS:
            stages.wrap(batch, step)
        stages.wrap(loop, "prebuild_all")
        stages.wrap(holding_module, "prebuild_all")  # the holding half imported it by name
        stages.wrap(engine.queue, "receive")
        stop = threading.Event()
        cpu_before, wall_before = time.process_time(), time.perf_counter()
        thread = threading.Thread(target=worker.run, args=(stop,), name="punctual-loop")
        thread.start()
        while engine.queue.depth() and time.perf_counter() - wall_before < 120:  # bounded
            threads.sample()
            time.sleep(0.05)
        threads.sample()
        cpu_s, wall_s = time.process_time() - cpu_before, time.perf_counter() - wall_before
        stop.set()
        thread.join()
        engine.close()
    per_run = {name: round(seconds * 1e6 / count) for name, seconds in stages.seconds.items()}
    per_run["loop+rest"] = round((cpu_s - sum(stages.seconds.values())) * 1e6 / count)
    print(f"us per run by stage: {per_run}")
    print(f"collector: {collector.seconds * 1e6 / count:.1f} us per run, runs per generation {collector.runs}")
    print(f"runs={count} prelease_s={prelease_s}: {cpu_s * 1e6 / count:.0f} us CPU per run, {wall_s:.2f} s wall")
    print(f"outcomes: {dict(worker.outcomes)}")
    by_thread = {name: round(seconds * 1e6 / count) for name, seconds in threads.by_group().items()}
    print(f"us per run by thread: {by_thread}")
    if profile_dir is not None:
        profile_dir.mkdir(parents=True, exist_ok=True)
        for name, profilers in stages.profiles.items():
            with (profile_dir / f"{name}.txt").open("w") as out:
                stats = pstats.Stats(profilers[0], stream=out)
                for other in profilers[1:]:
                    stats.add(other)
                stats.sort_stats("tottime").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--prelease-s", type=int, default=0)
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR")
    parser.add_argument("--alone", action="store_true", help="the blocking steps alone: no worker, no HTTP")
    args = parser.parse_args()
    if args.alone:
        alone(args.runs)
    else:
        run(args.runs, args.prelease_s, args.profile)


if __name__ == "__main__":
    main()
