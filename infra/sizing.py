"""What a plain ``npx cdk deploy`` carries, and the notices synthesis prints about it.

The context defaults (``infra.config``) are the deploy line of ``punctual capacity`` for
:data:`DEFAULT_JOBS` jobs and :data:`DEFAULT_PEAK_RUNS_PER_SECOND` runs/s on Lambda workers and
on-demand tables (:data:`DEFAULT_CHOICES`; tests/infra/test_sizing.py keeps them equal): a plain
deploy works in an account with default quotas for that load, and no more, needs no Docker (the
Fargate tier builds an image) and costs nothing while idle (provisioned capacity would). The plan
for that load recommends the cheaper Fargate tier and provisioned tables: its deploy line says so.
Synthesis without any sizing parameter prints a notice saying so (and naming ``punctual capacity``),
and one when no one is subscribed to the alarms. Notices go to stderr and never stop synthesis: a
small stack is a valid choice.
"""

from __future__ import annotations

from collections.abc import Iterable

from infra.config import InfraConfig

DEFAULT_JOBS = 1_000_000
DEFAULT_PEAK_RUNS_PER_SECOND = 1_000
DEFAULT_CHOICES = {
    "worker": "lambda",
    "dynamodb": "on-demand",
}  # punctual capacity --worker lambda --dynamodb on-demand
CAPACITY_COMMAND = "punctual capacity --jobs N --peak-runs-per-second R"

# The parameters a deploy line of `punctual capacity` sets: any of them given means someone sized the stack.
SIZING_PARAMETERS = frozenset(
    {
        "shards",
        "open_shards",
        "scheduler_instances",
        "lookahead_ms",
        "claim_window_s",
        "worker_max_concurrency",
        "worker_reserved_concurrency",
        "worker_batch_size",
        "worker_min_pollers",
        "worker_max_pollers",
        "fargate_workers",
        "fargate_worker_count",
        "lambda_workers",
        "scheduler_memory_mb",
        "dynamodb_billing",
        "warm_throughput",
        "lambda_concurrency_quota",
    }
)


def notices(config: InfraConfig, given: Iterable[str]) -> list[str]:
    """What to tell whoever synthesizes ``config``, built from the context keys ``given``."""
    out: list[str] = []
    if not SIZING_PARAMETERS & set(given):
        out.append(
            f"no sizing parameters given: this is the small default stack, sized for {DEFAULT_JOBS:,} jobs and"
            f" {DEFAULT_PEAK_RUNS_PER_SECOND:,} runs/s at the top of a minute in an account with default quotas"
            f" (punctual capacity --jobs {DEFAULT_JOBS} --peak-runs-per-second {DEFAULT_PEAK_RUNS_PER_SECOND}"
            " --worker lambda --dynamodb on-demand):"
            f" {config.scheduler_instances} scheduler instance(s) over {config.shards} shards, standard SQS polling"
            f" with at most {config.worker_reservation} concurrent worker invocations, tables not pre-warmed."
            f" For a larger load deploy the line `{CAPACITY_COMMAND}` prints; choose shards before the first deploy"
            " (docs/deploy.md)"
        )
    if config.alarm_email is None:
        out.append(
            "no alarm_email: alarms publish to the ops topic (output OpsAlarmTopicArn) and nobody is subscribed;"
            " -c alarm_email=ops@example.com subscribes an address, or subscribe your pager to the topic"
        )
    return out
