"""Every constant the capacity model uses, with its source and the date it was taken.

One table, documented in ``docs/capacity.md`` (a test keeps the two in step). Prices are
us-east-1, on-demand, without free tiers. Limits are AWS defaults; "measured" values come from
this repository's own tests and benchmarks; "estimate" values are judgement, marked as such.
"""

from __future__ import annotations

from punctual.capacity.aws_constants import AWS_CONSTANTS, LAMBDA_PRICE
from punctual.capacity.sourced import Constant, Kind, sourced

_BENCH = "punctual bench aws (docs/benchmarks.md)"
_SPLIT = "punctual bench aws: the requests before the instant"
_LOGS = "tests/integration/test_log_volume.py"
_ITEMS = "tests/integration/test_aws_engine.py::test_run_and_job_items_stay_small"
_NEW = "2026-12-01"

_MEASURED = (
    *sourced(
        _BENCH,
        (
            "worker_cpu_ms_per_run",
            6.8,
            "ms",
            Kind.MEASURED,
            "the async worker's CPU per run on the aws engine (lease, job read, target call, finish; receive and"
            " delete shares), its process only, against a moto server in another process",
        ),
        (
            "scheduler_cpu_ms_per_claim",
            4.9,
            "ms",
            Kind.MEASURED,
            "the scheduler's CPU per claimed run on the aws engine (insert, advance; query and send shares)",
        ),
        (
            "scheduler_cpu_ms_per_poll",
            2.4,
            "ms",
            Kind.MEASURED,
            "the scheduler's CPU per query of an owned shard with nothing due (each shard, every second)",
        ),
        (
            "target_request_bytes",
            557,
            "bytes",
            Kind.MEASURED,
            "an HTTP attempt's request without its body, signed (request line and headers)",
        ),
        (
            "fargate_log_bytes_per_run",
            0,
            "bytes",
            Kind.MEASURED,
            "what punctual worker logs per run at INFO on the happy path (it logs warnings only)",
        ),
        as_of=_NEW,
    ),
    *sourced(
        _LOGS,
        (
            "lambda_log_bytes_per_invocation",
            780,
            "bytes",
            Kind.MEASURED,
            "a worker invocation's output (EMF metrics of a batch of 10, no log line on the happy path) + Lambda's"
            " START, END and REPORT lines (340 bytes, AWS's format); a reaper invocation is priced alike",
        ),
        (
            "scheduler_log_bytes_per_tick",
            360,
            "bytes",
            Kind.MEASURED,
            "the EMF document a scheduler invocation flushes after each tick (skew, claim lag, failed ticks)",
        ),
        as_of=_NEW,
    ),
    *sourced(
        _ITEMS,
        ("run_item_bytes", 600, "bytes", Kind.MEASURED, "a finished run with one attempt (bounded response excerpt)"),
    ),
    *sourced(
        _ITEMS,
        (
            "job_head_bytes",
            470,
            "bytes",
            Kind.MEASURED,
            "a job's head (short owner and schedule) with its due and by_owner index entries",
        ),
        ("job_spec_bytes", 240, "bytes", Kind.MEASURED, "a job's spec without its payload (a target without headers)"),
        as_of=_NEW,
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
)

_ESTIMATED = (
    *sourced(
        _SPLIT,
        (
            "worker_cpu_prestart_share",
            0.5,
            "fraction",
            Kind.ESTIMATE,
            "the share of a run's worker CPU spent before its instant: the CPU split as the measured requests"
            " are (receive, job read, lease: 1.12 of 2.22 per run)",
        ),
        as_of=_NEW,
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
        "estimate",
        (
            "cpu_utilization",
            0.7,
            "fraction",
            Kind.ESTIMATE,
            "the share of a vCPU the plan fills with scheduler or worker CPU (headroom for GC and jitter)",
        ),
        (
            "scheduler_min_memory_mb",
            512,
            "MB",
            Kind.ESTIMATE,
            "the scheduler Lambda's smallest memory: Python, boto3 and Punctual loaded, with room",
        ),
        (
            "flow_log_bytes_per_run",
            15,
            "bytes",
            Kind.ESTIMATE,
            "VPC flow logs of the Fargate tier: one ~150-byte record per 10 target calls (connections kept alive)",
        ),
        (
            "lambda_environment_hours",
            2,
            "hours",
            Kind.ESTIMATE,
            "how long a Lambda execution environment lives before it is replaced (undocumented)",
        ),
        (
            "fargate_task_starts_per_month",
            30,
            "starts",
            Kind.ESTIMATE,
            "starts of each Fargate task a month (deploys, replacements)",
        ),
        (
            "retry_rate",
            0.01,
            "fraction",
            Kind.ESTIMATE,
            "runs whose attempt fails and is retried once (state yours: a flaky target's rate is its own)",
        ),
        (
            "tenant_wait_rate",
            0.01,
            "fraction",
            Kind.ESTIMATE,
            "runs that wait once for their owner's max_runs_per_minute or max_concurrency",
        ),
        (
            "xray_api_sampling_rate",
            0.01,
            "fraction",
            Kind.ESTIMATE,
            "the stack's X-Ray sampling rule for the API: 1 request a second and this share of the rest"
            " (infra.config: xray_sampling_rate)",
        ),
        as_of=_NEW,
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
        as_of=_NEW,
    ),
    *sourced(
        LAMBDA_PRICE,
        ("month_hours", 730, "hours", Kind.ESTIMATE, "hours in the average month (AWS pricing calculator)"),
    ),
)

CONSTANTS: dict[str, Constant] = {c.key: c for c in (*AWS_CONSTANTS, *_MEASURED, *_ESTIMATED)}


def value(key: str) -> float:
    """The value of constant ``key`` (KeyError for an unknown key: a typo must not price at 0)."""
    return CONSTANTS[key].value
