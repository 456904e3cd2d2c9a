"""``punctual bench minute``, small: 1,000 every-minute jobs for one minute, end to end.

The real command in its own process, which starts the webhook (nginx where installed, else the
project's no-op target), ``punctual api``, ``scheduler``, two ``worker`` and ``reaper`` processes on
127.0.0.1. It checks exactly-once delivery and the report's shape, never a time: the figures are
printed (``pytest -s``) for whoever reads the CI log. It waits for the next minute boundary that
follows creating the jobs, so it takes one to two minutes.

The webhooks on their own (fast): each records every request's arrival and ``Idempotency-Key``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from punctual.bench.minute_figures import MINUTE_KEYS, TOP_KEYS
from punctual.bench.webhooks import find_nginx, webhook

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
JOBS = 1_000
RUN_TIMEOUT_S = 200  # start-up, at most ~70 s to the measured boundary, the drain, the stop


@pytest.mark.timeout(RUN_TIMEOUT_S + 30)
def test_a_small_minute_bench_delivers_every_run_exactly_once() -> None:
    # Given a clean environment: nothing PUNCTUAL_* or AWS_* from the caller's shell
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PUNCTUAL_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "layers" / "core" / "python"), str(REPO)])
    command = [sys.executable, "-m", "punctual.cli", "bench", "minute", "--jobs", str(JOBS), "--minutes", "1", "--json"]

    # When the bench runs one minute of 1,000 every-minute jobs
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=RUN_TIMEOUT_S, check=False)
    took_s = time.monotonic() - started
    assert done.returncode == 0, f"{done.stderr[-3000:]}\n{done.stdout[-2000:]}"
    result = json.loads(done.stdout)
    print(f"\npunctual bench minute --jobs {JOBS} --minutes 1 ({took_s:.0f} s):\n{json.dumps(result, indent=1)}")

    # Then every key is there, and every run arrived at the webhook exactly once
    assert set(TOP_KEYS) <= set(result)
    assert set(result["peak_rss_mib"]) == {"api", "scheduler", "worker-1", "worker-2", "reaper"}
    assert [m["minute"] for m in result["minutes"]] == [1]
    for minute in result["minutes"]:
        assert set(MINUTE_KEYS) <= set(minute)
        assert minute["arrived"] == minute["distinct_runs"] == JOBS, minute
        assert minute["duplicates"] == 0, minute
        assert minute["runs_started"] == JOBS, minute
    assert result["create"]["jobs"] == JOBS
    assert ("nginx" in result["target"]) == (find_nginx() is not None)


@pytest.mark.parametrize("kind", ["noop", "nginx"])
@pytest.mark.parametrize("delay_ms", [0, 200])
def test_the_webhook_logs_each_arrival_with_its_idempotency_key(kind: str, delay_ms: int) -> None:
    if kind == "nginx" and find_nginx() is None:
        pytest.skip("nginx is not installed (scripts/install-nginx)")
    with webhook(delay_ms, kind) as hook, httpx.Client(timeout=10) as client:
        before_ms = time.time() * 1000
        for key in ("run_a", "run_b", None):
            headers = {"Idempotency-Key": key} if key else {}
            sent_ms = time.time() * 1000
            assert client.post(hook.url, json={"n": 1}, headers=headers).status_code in (200, 204)
            # answered after the delay: the request waited at the webhook, not before it
            assert time.time() * 1000 - sent_ms >= delay_ms * 0.9
        after_ms = time.time() * 1000
        arrivals = hook.arrivals() + hook.finish()
    assert kind in hook.description or (kind == "noop" and "no-op" in hook.description)
    assert [a.key for a in arrivals] == ["run_a", "run_b", None]
    # arrival, not the answer: each before its answer's delay ran out
    assert all(before_ms - 5 <= a.at_ms <= after_ms - delay_ms * 0.9 + 5 for a in arrivals)
    if kind == "nginx":  # one keep-alive connection for the three
        assert [a.new_connection for a in arrivals] == [True, False, False]
