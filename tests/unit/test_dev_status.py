"""``punctual dev``'s status line (issue 31): every kind of run counts as dispatched, and start
lateness leaves out what the job or its owner asked for (jitter, a limit's wait).

The worker's side on both engines: tests/contract/test_admission.py (a start that waited for
``max_concurrency`` is not observed) and tests/contract/test_dependencies_paths.py (released runs
count as dispatched).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from punctual import metrics as m
from punctual.api.app import handle
from punctual.api.caller import Services
from punctual.cli.dev import StatusLine, dev_components
from punctual.clock import ManualClock
from punctual.config import Settings
from punctual.engines.embedded import EmbeddedEngine
from punctual.execution.leasing import observe_start
from punctual.metrics import InMemoryMetrics
from punctual.model import HttpTarget, Job, Run
from punctual.scheduling.planning import jitter_offset_ms
from tests.regressions.conftest import TARGET, api_event

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[EmbeddedEngine]:
    engine = EmbeddedEngine.from_settings(Settings(data_dir=str(tmp_path), shards=4), clock=ManualClock(T0))
    yield engine
    engine.close()


def test_a_trigger_counts_as_dispatched_in_the_status_lines_metrics(engine: EmbeddedEngine, tmp_path: Path) -> None:
    metrics = InMemoryMetrics()
    settings = Settings(data_dir=str(tmp_path), shards=4)
    services = Services.of(engine, settings, ManualClock(T0), metrics)
    body = {"name": "by-hand", "schedule": "0 * * * *", "target": TARGET}
    job = json.loads(handle(api_event("POST", "/jobs", body, owner="local"), None, services)["body"])
    triggered = handle(api_event("POST", f"/jobs/{job['id']}/trigger", None, owner="local"), None, services)
    assert triggered["statusCode"] == 202
    assert metrics.counters[m.RUNS_DISPATCHED] == 1
    # punctual dev gives the same sink to its components: the status line reads the API's counts too
    components = dev_components(settings, engine, metrics)
    assert next(c for c in components if isinstance(c, StatusLine)).metrics is metrics


def job_and_run(jitter_s: int = 0, attempt: int = 1) -> tuple[Job, Run]:
    job = Job(
        id="job_" + "b" * 32, owner="o", name="j", schedule="* * * * *", target=HttpTarget(url="https://example.com/h"),
        jitter_s=jitter_s, created_at=T0, updated_at=T0,
    )  # fmt: skip
    run = Run(job_id=job.id, scheduled_at=T0, owner="o", attempt=attempt, deadline_at=T0, created_at=T0)
    return job, run


def test_start_lateness_counts_from_the_instant_plus_jitter_and_leaves_out_limit_waits() -> None:
    sink = InMemoryMetrics()
    job, run = job_and_run()
    observe_start(sink, job, run, T0 + 250, None)
    observe_start(sink, job, run, T0 + 254_085, "max_runs_per_minute 4")  # waited for its owner's limit
    observe_start(sink, *job_and_run(attempt=2), T0 + 9_000, None)  # a retry starts at its backoff
    jittered, its_run = job_and_run(jitter_s=60)
    offset = jitter_offset_ms(its_run.run_id, 60)
    observe_start(sink, jittered, its_run, T0 + offset + 40, None)
    observe_start(None, job, run, T0, None)  # no sink: nothing to do
    assert list(sink.samples[m.START_LATENESS_MS]) == [250, 40]
