"""Every constant the capacity model uses, with its source and the date it was taken.

One table, documented in ``docs/capacity.md`` (a test keeps the two in step). Prices are
us-east-1, on-demand, without free tiers. Limits are AWS defaults; "measured" values come from
this repository's own tests and benchmarks; "estimate" values are judgement, marked as such.
"""

from __future__ import annotations

from punctual.capacity.aws_constants import AWS_CONSTANTS, LAMBDA_PRICE
from punctual.capacity.sourced import AS_OF, Constant, Kind

_README = "README.md, Measured (punctual bench burst --execute)"
_DEPLOY = "docs/deploy.md, scheduler_instances"

_PUNCTUAL = (
    # -- Punctual, measured or estimated ----------------------------------------------------------
    Constant(
        "scheduler_claims_per_s",
        300,
        "runs/s per instance",
        Kind.ESTIMATE,
        "claims one scheduler Lambda (1 vCPU) makes: two conditional writes per run, CPU-bound in botocore",
        _DEPLOY,
        AS_OF,
    ),
    Constant(
        "worker_runs_per_vcpu",
        350,
        "runs/s per vCPU",
        Kind.MEASURED,
        "long-running worker executing no-op HTTP targets (2 processes on 2 cores: ~700 runs/s)",
        _README,
        AS_OF,
    ),
    Constant(
        "worker_batch_overhead_s",
        0.05,
        "s",
        Kind.ESTIMATE,
        "per worker invocation: lease, finish, acknowledge a batch",
        "estimate",
        AS_OF,
    ),
    Constant(
        "job_item_bytes",
        700,
        "bytes",
        Kind.MEASURED,
        "a job item with a small payload, with its due and by_owner index entries",
        "tests/integration/test_aws_engine.py::test_run_and_job_items_stay_small",
        AS_OF,
    ),
    Constant(
        "run_item_bytes",
        600,
        "bytes",
        Kind.MEASURED,
        "a finished run with one attempt (bounded response excerpt)",
        "tests/integration/test_aws_engine.py::test_run_and_job_items_stay_small",
        AS_OF,
    ),
    Constant(
        "slot_holders_per_kb",
        18,
        "holders",
        Kind.MEASURED,
        "runs an owner's concurrency-slot item names per KB (one write unit per take or release per KB)",
        "tests/integration/test_tenant_write_units.py",
        AS_OF,
    ),
    Constant(
        "log_bytes_per_run",
        1_000,
        "bytes",
        Kind.ESTIMATE,
        "worker log lines and EMF metrics per run",
        "docs/deploy.md, Cost and sizing",
        AS_OF,
    ),
    Constant(
        "custom_metrics",
        23,
        "metrics",
        Kind.ESTIMATE,
        "EMF metric series the stack emits (with the scheduler's tick failures, failed ticks in a row, claim lag)",
        "punctual/metrics.py",
        "2026-12-01",
    ),
    Constant(
        "alarms",
        39,
        "alarm metrics",
        Kind.MEASURED,
        "metrics the stack's 25 alarms read (default and plan stacks; a metric-math alarm is priced per metric)",
        "tests/infra/test_stack.py",
        "2026-12-01",
    ),
    Constant(
        "month_hours",
        730,
        "hours",
        Kind.ESTIMATE,
        "hours in the average month (AWS pricing calculator)",
        LAMBDA_PRICE,
        AS_OF,
    ),
)

CONSTANTS: dict[str, Constant] = {c.key: c for c in (*AWS_CONSTANTS, *_PUNCTUAL)}


def value(key: str) -> float:
    """The value of constant ``key`` (KeyError for an unknown key: a typo must not price at 0)."""
    return CONSTANTS[key].value
