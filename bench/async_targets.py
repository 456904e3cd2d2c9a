"""What one HTTP target call costs the worker: ``AsyncTargets.execute`` and ``prebuild`` per call.

Run: ``.venv/bin/python bench/async_targets.py [--calls 10000] [--rounds 5] [--profile]``

The target is ``punctual.bench.target`` (another process, 127.0.0.1, 204 at once, keep-alive).
``--calls`` attempts of as many jobs are executed at once on one uvloop loop (1,024 connections,
the rest queue for them, as in a burst), with the request built at the call or ahead of it
(``prebuild``, as for pre-leased runs), unsigned or signed with the embedded engine's keys.
Reported per call, the best of ``--rounds``: wall time, and the process's CPU time (what issue 9's
budget counts; the target's process is not included). The collector runs with the worker's
settings (``collect_rarely``) unless ``--default-gc``. Figures are in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, "layers/core/python")

from punctual.bench.jobs import bench_jobs
from punctual.bench.target import noop_target
from punctual.engines.embedded.keys import LocalKeys
from punctual.execution.targets.aio import AsyncTargets
from punctual.execution.targets.policy import TargetPolicy
from punctual.model import Job, Run, RunState
from punctual.port import Keys
from punctual.runtime.process import collect_rarely


async def measure(
    jobs: list[Job], runs: list[Run], keys: Keys | None, *, prebuilt: bool, rounds: int, profile: bool
) -> str:
    targets = AsyncTargets(TargetPolicy(allow_loopback=True), keys=keys)
    warm = min(1000, len(jobs))
    await asyncio.gather(*(targets.execute(j, r, 1, 10.0) for j, r in zip(jobs[:warm], runs[:warm], strict=True)))
    best = [float("inf")] * 3
    for round_ in range(rounds):
        started_cpu = time.process_time()
        if prebuilt:
            for job, run in zip(jobs, runs, strict=True):
                targets.prebuild(job, run, 1)
        build_cpu = time.process_time() - started_cpu
        profiler = cProfile.Profile() if profile and round_ == rounds - 1 else None
        started, started_cpu = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        results = await asyncio.gather(*(targets.execute(j, r, 1, 10.0) for j, r in zip(jobs, runs, strict=True)))
        if profiler is not None:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        wall, cpu = time.perf_counter() - started, time.process_time() - started_cpu
        assert all(result.ok for result in results), [r for r in results if not r.ok][:3]
        best = [min(best[0], wall), min(best[1], cpu), min(best[2], build_cpu)]
    targets.close()
    per = [figure * 1e6 / len(jobs) for figure in best]
    return (
        f"keys={'embedded' if keys else 'none':8} prebuilt={prebuilt!s:5}  execute: wall {per[0]:6.1f} us/call "
        f"({1e6 / per[0]:7,.0f}/s), CPU {per[1]:5.1f} us/call; prebuild CPU {per[2]:5.1f} us/call"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="cProfile the last round of each case")
    parser.add_argument("--default-gc", action="store_true", help="CPython's collector settings, not the worker's")
    args = parser.parse_args()
    import uvloop

    keys = LocalKeys(Path(tempfile.mkdtemp()) / "secrets.key")
    with noop_target(0) as url:
        # each job its own objects, as read from a store (bench_jobs shares one target between them)
        made = bench_jobs(args.calls, now=1, due_at=2000, shards=16, cron=None, url=url)
        jobs = [Job.model_validate(job.model_dump()) for job in made]
        runs = [
            Run(
                job_id=j.id,
                owner=j.owner,
                scheduled_at=2000,
                deadline_at=5000,
                created_at=1,
                attempt=1,
                state=RunState.RUNNING,
            )
            for j in jobs
        ]

        if not args.default_gc:
            collect_rarely()  # as `punctual worker` does after start-up

        async def cases() -> None:
            for case_keys in (None, keys):
                for prebuilt in (False, True):
                    line = await measure(
                        jobs, runs, case_keys, prebuilt=prebuilt, rounds=args.rounds, profile=args.profile
                    )
                    print(line, flush=True)

        uvloop.run(cases())


if __name__ == "__main__":
    main()
