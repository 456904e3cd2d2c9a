"""How a run's DynamoDB units grow with its job's size (issue 30, item 1), measured on moto.

Ten runs of ten equal jobs go through the real claim and the worker Lambda's path, for jobs from
the smallest to the largest the API accepts (``MAX_JOB_BYTES``), and write and read units are
computed from the sizes of the items written and read (``wire.WriteMeter``, ``wire.ReadMeter``).
Writes do not grow: the claim rewrites the job's head, never its spec. Reads grow with the spec,
by half a unit per 4 KB (the worker reads it eventually consistent). docs/capacity.md states this
table; the model's counts (``punctual.capacity.counts``) are the reference job's row.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from punctual import resources
from punctual.capacity.counts import READS_PER_RUN, per_run
from punctual.clock import ManualClock
from punctual.config import EngineKind, Settings
from punctual.engines.aws import AwsEngine, ensure_resources, job_items
from punctual.execution.options import ExecutionOptions
from punctual.execution.sqs_events import LambdaWorker
from punctual.model import MAX_JOB_BYTES, HttpTarget
from punctual.scheduling.claim import claim_page
from tests.contract.factories import make_job
from tests.integration.test_capacity_counts import SHARD, T0, ReferenceTargets, _event, reference_job
from tests.integration.wire import ReadMeter, WriteMeter, item_size

pytestmark = pytest.mark.integration

RUNS = 10  # one SQS batch
HEADERS_4K = {f"x-hdr-{i}": "h" * 505 for i in range(8)}


def _sized(clock: ManualClock, payload_bytes: int, headers: dict[str, str]) -> Any:
    payload = None if payload_bytes == 0 else {"data": "p" * (payload_bytes - len('{"data":""}'))}
    target = HttpTarget(url="https://example.com/hook", headers=headers)
    return make_job("owner-cap", clock, shards=4, shard=SHARD, payload=payload, target=target)


def _largest(clock: ManualClock) -> Any:
    job = _sized(clock, 8 * 1024, {"x-pad": ""})
    pad = "v" * (MAX_JOB_BYTES - job.spec.size_bytes())
    return _sized(clock, 8 * 1024, {"x-pad": pad})


# job -> (write units per run, read units per run), open index on, GET /stats counters off
JOBS = {
    "no payload, no headers": (lambda clock: _sized(clock, 0, {}), 8, 1.5),
    "reference: 1 KB payload, 4 KB headers": (lambda clock: reference_job(clock, 4), 8, READS_PER_RUN),
    "4 KB payload, 4 KB headers": (lambda clock: _sized(clock, 4096, HEADERS_4K), 8, 2.5),
    "the largest accepted (MAX_JOB_BYTES)": (_largest, 8, 2.5),
}


@pytest.fixture
def engine() -> Iterator[AwsEngine]:
    with mock_aws():
        settings = Settings(
            engine=EngineKind.AWS, shards=4, open_shards=2, name_prefix="grow", open_index=True, stats_counters=False
        )
        engine = AwsEngine(ensure_resources(settings), clock=ManualClock(T0), serialize=True)
        yield engine
        engine.close()


@pytest.mark.parametrize("name", list(JOBS))
def test_writes_stay_flat_and_reads_grow_with_the_spec(engine: AwsEngine, name: str) -> None:
    build, writes, reads = JOBS[name]
    clock, store = ManualClock(T0), engine.store
    jobs = [build(clock) for _ in range(RUNS)]
    for job in jobs:
        store.create_job(job)
    spec_bytes = item_size(job_items.job_to_items(jobs[0], retention_days=30)[1])
    write_meter = WriteMeter(engine, resources.tables(open_index=True))
    read_meter = ReadMeter(engine)
    with write_meter.phase("run"):
        stats = claim_page(store, engine.queue, SHARD, clock.now_ms(), lookahead_ms=3_000, limit=500)
        assert stats.dispatched == RUNS
        worker = LambdaWorker(engine, clock, options=ExecutionOptions(), targets=ReferenceTargets)
        with read_meter.phase("worker"):
            failures, _ = worker.handle(_event(engine)["Records"], "lambda:test")
    write_meter.close()
    read_meter.close()
    assert failures == []
    # Then every write is under 1 KB and a run costs the model's write units, whatever the job's size
    assert write_meter.largest["run"] <= 1024
    assert write_meter.units["run"] / RUNS == writes == per_run(open_index=True, stats_counters=False).writes.total
    # And the worker reads the head (1 unit) and the spec (0.5 per 4 KB started)
    assert read_meter.units["worker"] / RUNS == reads == 1 + 0.5 * math.ceil(spec_bytes / 4096)
