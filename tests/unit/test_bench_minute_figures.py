"""The minute bench's arithmetic: the nginx log line, the grouping by instant, one minute's figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from punctual import ids
from punctual.bench.minute import _ceil_minute
from punctual.bench.minute_figures import MINUTE_KEYS, by_instant, minute_figures, table
from punctual.bench.webhooks import Arrival, _parse, nginx_config
from punctual.model import Attempt, AttemptOutcome, Run, RunState

pytestmark = pytest.mark.unit

BOUNDARY = 1_796_148_240_000  # a minute boundary (2026-12-01T18:04:00Z)
JOB_A, JOB_B = "job_" + "a" * 32, "job_" + "b" * 32


def test_an_access_log_line_gives_the_arrival_not_the_answer() -> None:
    # $msec is when the request ended; $request_time how long it took since its first byte
    key = ids.run_id_for(JOB_A, BOUNDARY)
    arrival = _parse(f"1796148240.450 0.200 1 {key}".encode())
    assert arrival == Arrival(1_796_148_240_250, key, True)
    assert _parse(b"1796148240.450 0.000 7 -") == Arrival(1_796_148_240_450, None, False)
    assert _parse(b"garbage") is None


def test_arrivals_group_by_the_instant_in_their_run_id_and_only_for_the_bench_jobs() -> None:
    arrivals = [
        Arrival(BOUNDARY + 5, ids.run_id_for(JOB_A, BOUNDARY)),
        Arrival(BOUNDARY + 60_005, ids.run_id_for(JOB_A, BOUNDARY + 60_000)),
        Arrival(BOUNDARY + 6, ids.run_id_for(JOB_B, BOUNDARY)),  # not a bench job
        Arrival(BOUNDARY + 7, "not-a-run-id"),
        Arrival(BOUNDARY + 8, None),
    ]
    grouped = by_instant(arrivals, {JOB_A})
    assert {k: [a.at_ms for a in v] for k, v in grouped.items()} == {
        BOUNDARY: [BOUNDARY + 5],
        BOUNDARY + 60_000: [BOUNDARY + 60_005],
    }


def test_a_minute_counts_duplicates_once_and_measures_from_the_boundary_unclamped() -> None:
    a, b = ids.run_id_for(JOB_A, BOUNDARY), ids.run_id_for(JOB_B, BOUNDARY)
    arrivals = [Arrival(BOUNDARY + 300, a, True), Arrival(BOUNDARY - 2, b, False), Arrival(BOUNDARY + 900, a, False)]
    runs = [_run(JOB_A, started=BOUNDARY + 100), _run(JOB_B, started=BOUNDARY + 40)]

    figures = minute_figures(1, BOUNDARY, 3, arrivals, runs)

    assert set(MINUTE_KEYS) <= set(figures)
    assert figures["arrived"] == 3
    assert figures["distinct_runs"] == 2
    assert figures["duplicates"] == 1
    assert figures["missing"] == 1
    assert figures["arrived_before_boundary"] == 1  # a contract breach shows, it is not hidden at 0
    assert figures["arrival_lateness_ms_max"] == 300  # the first arrival of each run counts
    assert figures["arrival_lateness_ms_p50"] == -2
    assert figures["start_lateness_ms_p99"] == 100
    assert figures["runs_succeeded"] == 2
    assert figures["new_connections"] == 1
    assert figures["boundary"] == "2026-12-01T18:04:00Z"
    # how the burst reached the webhook: [ms after the boundary, arrived, on a new connection] per 100 ms
    assert figures["arrivals_by_100ms"] == [[-100, 1, 0], [300, 1, 1], [900, 1, 0]]


def test_the_table_shows_each_minute() -> None:
    minute = minute_figures(1, BOUNDARY, 1, [Arrival(BOUNDARY + 12, ids.run_id_for(JOB_A, BOUNDARY))], [])
    result = {
        "jobs": 1,
        "worker_processes": 2,
        "target": "nginx/1.22.1",
        "create": {"via": "api", "jobs": 1, "seconds": 0.1, "creates_per_second": 10, "connections": 8},
        "warmup_runs_arrived": 0,
        "minutes": [minute],
        "worker_cpu_ms_per_run": 0.1,
        "scheduler_cpu_ms_per_run": 0.01,
        "cpu_window_seconds": 9.0,
        "peak_rss_mib": {"api": 80.0},
    }
    text = table(result)
    assert "18:04:00" in text
    assert "12 ms" in text
    assert "nginx/1.22.1" in text


def test_nginx_listens_on_loopback_only_and_logs_what_the_figures_need(tmp_path: Path) -> None:
    config = nginx_config(tmp_path, 8123, 200)
    assert "listen 127.0.0.1:8123 " in config
    assert "$msec $request_time $connection_requests $http_idempotency_key" in config
    assert "echo_sleep 0.2;" in config
    assert "return 200;" in nginx_config(tmp_path, 8123, 0)
    assert "load_module" not in nginx_config(tmp_path, 8123, 0)


def test_minutes_round_up_to_the_boundary() -> None:
    assert _ceil_minute(BOUNDARY) == BOUNDARY
    assert _ceil_minute(BOUNDARY + 1) == BOUNDARY + 60_000


def _run(job_id: str, *, started: int) -> Run:
    attempt = Attempt(
        number=1, worker_id="w", started_at=started, finished_at=started + 5, outcome=AttemptOutcome.SUCCEEDED
    )
    return Run(
        job_id=job_id,
        scheduled_at=BOUNDARY,
        owner="o",
        state=RunState.SUCCEEDED,
        attempt=1,
        deadline_at=BOUNDARY + 60_000,
        created_at=BOUNDARY - 5_000,
        attempts=[attempt],
    )
