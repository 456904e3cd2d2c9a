"""What signing costs per run: building one HTTP attempt's request, signed and not, on the worker's path.

Run: ``.venv/bin/python bench/signing.py [--calls 20000] [--rounds 7]``

No network: ``AsyncTargets._build`` is what ``prebuild`` (a pre-leased run) and ``call`` (a run
leased at its instant) do per attempt once the address is known: the header template, the body and
the signature. Measured for a job without headers of its own (the template, most jobs) and with
one (the dict of ``request_headers``), with the payload ``null`` and with ~1 KB of JSON, unsigned
(no keys) and signed with the embedded engine's keys: v1 and v2 (the default until 0.2.0) and v2
alone (``target.signature: "v2"``); then ``signing.signature_header`` alone. Reported per call in
microseconds of process CPU, the best of ``--rounds``. Runs on a tree from before v2 too (v1 alone,
as it signed then): compare two trees with ``PYTHONPATH=<tree>/layers/core/python`` in alternating
runs (this machine's speed drifts).
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, "layers/core/python")

from punctual.bench.jobs import bench_jobs
from punctual.engines.embedded.keys import LocalKeys
from punctual.execution.targets import aio, signing
from punctual.execution.targets.aio import AsyncTargets
from punctual.execution.targets.policy import TargetPolicy
from punctual.model import HttpTarget, Job, Run, RunState

URL = "https://hooks.example.com:8443/v1/reports/nightly?tenant=acme&x=%20y"
HAS_V2 = hasattr(signing, "signature_v2")


def parse_url(url: str) -> Any:
    """The URL's parts as the builders read them: ``request_rules.target_url`` (``aio._parse`` on a
    tree from before that module)."""
    try:
        from punctual.execution.targets.request_rules import target_url
    except ImportError:
        return aio._parse(url)  # type: ignore[attr-defined]  # older trees only
    return target_url(url)


def best_us(calls: int, rounds: int, step: Callable[[int], object]) -> float:
    """The best of ``rounds`` runs of ``step(i)`` for i in range(calls), in process-CPU us per call."""
    best = float("inf")
    for _ in range(rounds):
        gc.collect()
        started = time.process_time()
        for i in range(calls):
            step(i)
        best = min(best, time.process_time() - started)
    return best * 1e6 / calls


def build_cases(made: list[Job], keys: LocalKeys) -> list[tuple[str, list[Job], LocalKeys | None]]:
    """(label, jobs, keys) of each build case."""
    signatures: list[str | None] = [None, "v2"] if HAS_V2 else [None]
    cases: list[tuple[str, list[Job], LocalKeys | None]] = []
    for payload, size in ((None, "payload null"), ({"report": "sales", "rows": list(range(200))}, "payload ~1 KB")):
        for own_headers in (False, True):
            kind = "job headers" if own_headers else "template   "
            for choice in signatures:
                fields: dict[str, Any] = {"url": URL, "headers": {"X-Tenant": "acme"} if own_headers else {}}
                if choice is not None:
                    fields["signature"] = choice
                target = HttpTarget(**fields)
                jobs = [Job.model_validate({**job.model_dump(), "target": target, "payload": payload}) for job in made]
                if choice is None:
                    cases.append((f"{size:14} {kind} unsigned       ", jobs, None))
                scheme = ("v1+v2" if HAS_V2 else "v1   ") if choice is None else "v2   "
                cases.append((f"{size:14} {kind} signed {scheme}  ", jobs, keys))
    return cases


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    keys = LocalKeys(Path(tempfile.mkdtemp()) / "secrets.key")
    made = list(bench_jobs(args.calls, now=1, due_at=2000, shards=16, cron=None, url=URL))
    url = parse_url(URL)
    for label, jobs, case_keys in build_cases(made, keys):
        runs = [
            Run(job_id=j.id, owner=j.owner, scheduled_at=2000, deadline_at=5000, created_at=1, state=RunState.RUNNING)
            for j in jobs
        ]
        targets = AsyncTargets(TargetPolicy(), keys=case_keys)

        def build(i: int, targets: AsyncTargets = targets, jobs: list[Job] = jobs, runs: list[Run] = runs) -> object:
            return targets._build(jobs[i], runs[i], 1, url, "192.0.2.10")

        print(f"{label} build {best_us(args.calls, args.rounds, build):6.2f} us/call", flush=True)
        targets.close()
    secret = keys.signing_secret("bench")
    body = b'{"report":"sales"}'
    if not HAS_V2:
        us = best_us(
            args.calls, args.rounds, lambda i: signing.signature_header(secret, 1_800_000_000 + i, "run_x", body)
        )
        print(f"signature_header alone, v1                  {us:6.2f} us/call")
        return
    for v1 in (False, True):
        line = {"job_id": "job_x", "method": "POST", "host": url.netloc, "path": url.path, "v1": v1}

        def sign(i: int, line: dict[str, Any] = line) -> object:
            return signing.signature_header(secret, 1_800_000_000 + i, "run_x", body, **line)

        us = best_us(args.calls, args.rounds, sign)
        print(f"signature_header alone, {'v1+v2' if v1 else 'v2   '}               {us:6.2f} us/call")


if __name__ == "__main__":
    main()
