"""Every constant the capacity model uses, with its source and the date it was taken.

One table, documented in ``docs/capacity.md`` (a test keeps the two in step). Prices are
us-east-1, on-demand, without free tiers. Limits are AWS defaults; "measured" values come from
this repository's own tests and benchmarks; "estimate" values are judgement, marked as such.
"""

from __future__ import annotations

from punctual.capacity.aws_constants import AWS_CONSTANTS, LAMBDA_PRICE
from punctual.capacity.sourced import Constant, Kind, sourced

_README = "README.md, Measured (punctual bench burst --execute)"
_DEPLOY = "docs/deploy.md, scheduler_instances"

_PUNCTUAL = (
    # -- Punctual, measured or estimated --------------------------------------------------------------
    *sourced(
        _DEPLOY,
        (
            "scheduler_claims_per_s",
            300,
            "runs/s per instance",
            Kind.ESTIMATE,
            "claims one scheduler Lambda (1 vCPU) makes: two conditional writes per run, CPU-bound in botocore",
        ),
    ),
    *sourced(
        _README,
        (
            "worker_runs_per_vcpu",
            350,
            "runs/s per vCPU",
            Kind.MEASURED,
            "long-running worker executing no-op HTTP targets (2 processes on 2 cores: ~700 runs/s)",
        ),
    ),
    *sourced(
        "estimate",
        (
            "worker_batch_overhead_s",
            0.05,
            "s",
            Kind.ESTIMATE,
            "per worker invocation: lease, finish, acknowledge a batch",
        ),
    ),
    *sourced(
        "tests/integration/test_aws_engine.py::test_run_and_job_items_stay_small",
        (
            "job_item_bytes",
            700,
            "bytes",
            Kind.MEASURED,
            "a job item with a small payload, with its due and by_owner index entries",
        ),
        ("run_item_bytes", 600, "bytes", Kind.MEASURED, "a finished run with one attempt (bounded response excerpt)"),
    ),
    *sourced(
        "tests/integration/test_tenant_write_units.py",
        (
            "slot_holders_per_kb",
            18,
            "holders",
            Kind.MEASURED,
            "runs an owner's concurrency-slot item names per KB (one write unit per take or release per KB)",
        ),
    ),
    *sourced(
        "docs/deploy.md, Cost and sizing",
        ("log_bytes_per_run", 1_000, "bytes", Kind.ESTIMATE, "worker log lines and EMF metrics per run"),
    ),
    *sourced(
        "punctual/metrics.py",
        (
            "custom_metrics",
            23,
            "metrics",
            Kind.ESTIMATE,
            "EMF metric series the stack emits (with the scheduler's tick failures, failed ticks in a row, claim lag)",
        ),
        as_of="2026-12-01",
    ),
    *sourced(
        "tests/infra/test_stack.py",
        (
            "alarms",
            39,
            "alarm metrics",
            Kind.MEASURED,
            "metrics the stack's 25 alarms read (default and plan stacks; a metric-math alarm is priced per metric)",
        ),
        as_of="2026-12-01",
    ),
    *sourced(
        LAMBDA_PRICE,
        ("month_hours", 730, "hours", Kind.ESTIMATE, "hours in the average month (AWS pricing calculator)"),
    ),
)

CONSTANTS: dict[str, Constant] = {c.key: c for c in (*AWS_CONSTANTS, *_PUNCTUAL)}


def value(key: str) -> float:
    """The value of constant ``key`` (KeyError for an unknown key: a typo must not price at 0)."""
    return CONSTANTS[key].value
