"""Names, paths and fixed sizes of the CDK app. Tunable values live in ``infra.config`` instead.

Names shared with the running code come from the ``punctual`` package itself (metric names from
``punctual.metrics``, tables and queues from ``punctual.resources``), so they cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs

from punctual import metrics, model, resources
from punctual.config import Settings
from punctual.scheduling import invocation

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = PROJECT_ROOT / "pyproject.toml"
CDK_JSON = PROJECT_ROOT / "cdk.json"
FUNCTIONS_DIR = PROJECT_ROOT / "functions"
CORE_LAYER_DIR = PROJECT_ROOT / "layers" / "core"  # holds python/punctual: the layer's own layout
FARGATE_DOCKERFILE = "infra/fargate/Dockerfile"  # relative to PROJECT_ROOT, the image's build context

DEFAULT_STACK_NAME = "Punctual"

# DynamoDB in provisioned mode (infra.constructs.storage): auto scaling's maximum over its minimum, and its
# target utilization; punctual.capacity.modes plans with the same (AUTOSCALING_MAX_FACTOR, ddb_autoscaling_target)
AUTOSCALING_MAX_FACTOR = 4
AUTOSCALING_TARGET_PERCENT = 70
PROJECT_TAG = "punctual"

# -- Lambda runtime -------------------------------------------------------------------------------
# The newest Python runtime (what cdk-nag's AwsSolutions-L1 asks for, and the longest support
# window). The dependency layer is built for exactly this interpreter and architecture.
RUNTIME = lambda_.Runtime.PYTHON_3_14
ARCHITECTURE = lambda_.Architecture.ARM_64  # Graviton: ~20% cheaper per GB-s than x86_64
LAYER_PYTHON_VERSION = "3.14"
LAYER_PLATFORM = "manylinux2014_aarch64"
HANDLER = "handler.handler"  # functions/<name>/handler.py, function handler(event, context)
ASSET_EXCLUDES = ("**/__pycache__", "**/*.pyc", "**/.pytest_cache", "**/.mypy_cache")

# -- Powertools -----------------------------------------------------------------------------------
# One service name for every function: Powertools Metrics adds it as the "service" dimension, so
# the dashboard and alarms can address each metric with one dimension value whichever function
# (scheduler, worker, reaper) emitted it. The function name still tells the logs apart.
SERVICE_NAME = "punctual"
METRICS_NAMESPACE = "Punctual"
METRIC_DIMENSIONS = {"service": SERVICE_NAME}
LOG_LEVEL = "INFO"
# CloudWatch Logs accepts only these retention periods (days), the log_retention_days choices.
LOG_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
    1096: logs.RetentionDays.THREE_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    2192: logs.RetentionDays.SIX_YEARS,
    2557: logs.RetentionDays.SEVEN_YEARS,
    2922: logs.RetentionDays.EIGHT_YEARS,
    3288: logs.RetentionDays.NINE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}

RUNS_DISPATCHED = metrics.RUNS_DISPATCHED
RUNS_SUCCEEDED = metrics.RUNS_SUCCEEDED
RUNS_FAILED = metrics.RUNS_FAILED
RUNS_DEAD = metrics.RUNS_DEAD
DISPATCH_LATENESS_MS = metrics.DISPATCH_LATENESS_MS
SCHEDULER_SKEW_MS = metrics.SCHEDULER_SKEW_MS
CLAIM_CONFLICTS = metrics.CLAIM_CONFLICTS
SHARDS_OWNED = metrics.SHARDS_OWNED
START_LATENESS_MS = metrics.START_LATENESS_MS
SCHEDULER_TICK_FAILURES = metrics.SCHEDULER_TICK_FAILURES
SCHEDULER_FAILED_TICKS_IN_A_ROW = metrics.SCHEDULER_FAILED_TICKS_IN_A_ROW
CLAIM_LAG_MS = metrics.CLAIM_LAG_MS


# -- functions --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FunctionSpec:
    """One Lambda entry point: ``functions/<name>/handler.py``."""

    name: str
    description: str
    timeout_s: int
    memory_mb: int


# API Gateway's integration timeout is 29 s: a longer Lambda timeout would only hide a 504.
API_FUNCTION = FunctionSpec("api", "Punctual HTTP API (API Gateway REST proxy)", 29, 1024)
# The REQUEST authorizer of the callback routes: one HMAC per request (its key derived once per
# execution environment with one KMS GenerateMac), no storage read.
CALLBACK_AUTHORIZER_FUNCTION = FunctionSpec(
    "callback_authorizer", "Punctual callback authorizer: a callback token opens its run's two routes", 10, 256
)
# Invoked at second 0 of every minute, loops every second through the next minute's claim window
# until the next invocation takes its shard leases over, or second 40 of that minute at the latest
# (punctual.scheduling.invocation: 110 s). 1,769 MB is one full vCPU: the claim loop is CPU-bound in
# botocore (signing, JSON) at the top of the minute.
SCHEDULER_FUNCTION = FunctionSpec(
    "scheduler", "Punctual scheduler: claims due jobs, dispatches runs", invocation.TIMEOUT_S, 1769
)
# The worker's timeout is a context parameter (worker_timeout_s): it bounds the longest job a
# Lambda worker can run. Runs are I/O-bound (they wait on their target): little memory.
WORKER_FUNCTION = FunctionSpec("worker", "Punctual worker: leases and executes runs", 900, 512)
# Sweeps the open-runs index once a minute and drains the dead-letter queue.
REAPER_FUNCTION = FunctionSpec("reaper", "Punctual reaper: requeues stuck runs, dead-letters poison runs", 60, 1024)

# A scheduler invocation runs ~70 s of every 60: for ~10 s two invocations of one instance
# overlap (the old one finishing, the new one taking over), so each instance needs two concurrent
# executions.
SCHEDULER_CONCURRENCY_PER_INSTANCE = 2
EVENTBRIDGE_MAX_TARGETS_PER_RULE = 5  # EventBridge quota: 5 targets per rule

# -- long runs (infra.config: fargate_workers) --------------------------------------------------------
LEASE_MARGIN_S: int = Settings.model_fields["lease_margin_s"].default  # a lease = timeout_s + this
MAX_TIMEOUT_S = model.MAX_TIMEOUT_S  # the longest timeout_s any worker serves (12 h, SQS visibility)

# -- concurrency isolation (infra.config: lambda_concurrency_quota) ---------------------------------
UNRESERVED_CONCURRENCY = 100  # Lambda keeps this much of the account quota unreserved, always
# The reaper: one sweep a minute (a slow sweep may overlap the next: 2) and the dead-letter queue's
# event source (DEAD_LETTER_MAX_CONCURRENCY = 2).
REAPER_RESERVED_CONCURRENCY = 4
# The callback authorizer: one HMAC per callback request (a few ms): 10 serve about a thousand a second,
# and no other function can take them (punctual.capacity.workers counts them with the others)
CALLBACK_AUTHORIZER_RESERVED_CONCURRENCY = 10
MIN_WORKER_CONCURRENCY = 2  # the smallest SQS event source maximum concurrency
# Provisioned mode: each event poller drives up to 10 concurrent invocations (AWS docs; the same
# figure as punctual.capacity's lambda_invocations_per_poller), so worker_max_pollers x 10 is the
# most a provisioned event source can use: the worker's reservation by default in that mode.
INVOCATIONS_PER_POLLER = 10

# -- queues ---------------------------------------------------------------------------------------
# Lambda refuses an SQS event source whose queue visibility timeout is shorter than the function
# timeout, and AWS recommends at least 6x the function timeout so that a message survives the
# poller's retries while the function is throttled. Workers extend the visibility of the messages
# they hold (heartbeat), so this value is only the initial hide and the backstop after a crash;
# the reaper finds runs whose lease expired through the open-runs index without waiting for it.
VISIBILITY_PER_FUNCTION_TIMEOUT = 6
MAX_VISIBILITY_S = 12 * 3600  # SQS maximum
DEAD_LETTER_MAX_CONCURRENCY = 2  # the smallest SQS event source maximum concurrency

# -- worker targets ---------------------------------------------------------------------------------
# ARN service -> the one action a worker needs to deliver a run to a target of that kind
# (punctual.execution.targets.aws). Granted only on the ARNs listed in the target_arns context parameter.
TARGET_ACTIONS = {
    "lambda": "lambda:InvokeFunction",
    "states": "states:StartExecution",
    "sqs": "sqs:SendMessage",
    "events": "events:PutEvents",
}

# -- warm throughput (infra.config: warm_throughput, warm_write_units) -------------------------------
# The design target (20,000 runs/s at the top of a minute), in write units per second: a claim
# rewrites the job (1) and moves its key in the due index (2); a run is inserted, leased and
# finished (3, so the table is capped at the default 40,000 table quota) and enters and leaves the
# open index (2). The leases table and the by_owner index take little. ``punctual capacity``
# computes these for other loads.
DESIGN_WARM_WRITE_UNITS = {
    "jobs": 20_000,
    "jobs.due": 40_000,
    "runs": 40_000,
    "runs.open": 40_000,
}


# Reads: the worker reads the job of every run, its head and its spec (2 read units for a 1 KB payload
# and 4 KB of headers: punctual.capacity.counts.READS_PER_RUN), 40,000/s at the design target, capped
# like the runs table's writes at the default 40,000 table quota (punctual capacity asks for 48,000 and
# the quota raise); a new table starts at ~12,000 reads/s. Pre-warmed with warm_throughput too.
DESIGN_WARM_READ_UNITS = {"jobs": 40_000}


def warmable_resources() -> set[str]:
    """Every table ("jobs") and index ("jobs.due") warm throughput may be given for."""
    names = {table.logical_name for table in resources.TABLES}
    return names | {f"{t.logical_name}.{i.name}" for t in resources.TABLES for i in t.indexes}


# -- observability ----------------------------------------------------------------------------------
ALARM_PERIOD_MINUTES = 1
# Sustained, not instantaneous: the reaper drains the dead-letter queue within seconds, so a
# message still there after this many minutes means the reaper is failing.
DLQ_ALARM_MINUTES = 3
# Top-of-minute bursts make one late minute normal under load; three in a row are not.
LATENESS_ALARM_MINUTES = 3
ERROR_ALARM_MINUTES = 5
# A missing scheduler instance shows as one invocation too few every minute; an invocation that
# EventBridge delivers a few seconds late lands in the next minute once (one low, one high minute).
SCHEDULER_INVOCATION_ALARM_MINUTES = 3
# Ready messages left over for this long mean the workers do not keep up (a burst drains in seconds).
DEPTH_ALARM_MINUTES = 5
# A tenant noisy this long is flooding, not bursting: SQS fair queues shield the others, the operator
# decides whether it needs limits (punctual tenants set).
NOISY_TENANT_ALARM_MINUTES = 15
