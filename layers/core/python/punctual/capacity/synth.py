"""The burst model's input from a synthesized stack: ``cdk.out/<stack>.template.json``.

What ``cdk synth`` wrote is what ``cdk deploy`` deploys, so the simulation reads the settings from
there rather than from the context values: the scheduler's ``PUNCTUAL_SHARDS`` and
``PUNCTUAL_LOOKAHEAD_MS``, the scheduler instances from its EventBridge targets' input, the
worker's SQS event source (batch size, maximum concurrency, provisioned pollers) and reserved
concurrency, and each table's and index's warm throughput. Lambda workers only: a Fargate worker
service is reported, not simulated. ``punctual capacity`` builds the same :class:`Deployment`
from its plan (``punctual.capacity.workers.plan_deployment``), so the plan's lateness and the
synthesized stack's are one computation on the same figures.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from punctual.capacity.constants import value
from punctual.capacity.simulate import BurstSettings
from punctual.errors import ConfigError

SCHEDULER_DESCRIPTION = "Punctual scheduler"  # infra.constants.SCHEDULER_FUNCTION (description prefix)
WORKER_DESCRIPTION = "Punctual worker"


@dataclass(frozen=True, slots=True)
class Deployment:
    """The settings the burst model needs, as synthesized."""

    shards: int
    lookahead_ms: int
    scheduler_instances: int
    batch_size: int
    max_concurrency: int  # the event source's maximum (provisioned: max pollers x 10), capped by the reservation
    min_pollers: int  # 0: standard mode
    max_pollers: int
    reserved_concurrency: int  # the worker's reserved concurrency (0: none); caps provisioned mode too
    open_index: bool
    warm_writes: dict[str, int]  # "jobs", "jobs.due", "runs", ... -> pre-warmed writes/s (absent: default)
    fargate_tasks: int

    @property
    def shards_per_instance(self) -> int:
        """The busiest scheduler instance's shards (instance i owns shard % K == i)."""
        return -(-self.shards // max(1, self.scheduler_instances))

    @property
    def worker_concurrency(self) -> int:
        """Concurrent worker invocations at most: standard mode's maximum, or in provisioned mode
        ``min(max pollers x 10, reserved)``."""
        if not self.min_pollers:
            return self.max_concurrency
        driven = self.max_pollers * int(value("lambda_invocations_per_poller"))
        return min(driven, self.reserved_concurrency) if self.reserved_concurrency else driven

    def burst(
        self, runs_per_second: int, *, burst_seconds: int = 1, target_duration_ms: int = 500, steady: bool
    ) -> BurstSettings:
        """The simulation's input for a burst of ``runs_per_second`` on this deployment."""
        per_poller = int(value("lambda_invocations_per_poller"))
        maximum = self.worker_concurrency
        if self.min_pollers:
            ready = self.min_pollers * per_poller
            scale = value("lambda_poller_scale_per_min")
        else:
            ready = int(value("lambda_sqs_initial_batches"))
            scale = value("lambda_sqs_scale_per_min")
        # first burst after a deploy: tables at their warm throughput; steady (bursts every minute for
        # hours): on-demand has grown to the peak, up to the table-level quota
        default = value("ddb_table_quota_wru") if steady else value("ddb_warm_writes")

        def writes(name: str) -> float:
            return max(self.warm_writes.get(name, 0), default)

        return BurstSettings(
            burst_runs_per_second=runs_per_second,
            burst_seconds=burst_seconds,
            lookahead_ms=self.lookahead_ms,
            scheduler_instances=self.scheduler_instances,
            due_shards=self.shards,
            batch_size=self.batch_size,
            worker_mode="provisioned" if self.min_pollers else "standard",
            ready_concurrency=maximum if steady else min(ready, maximum),
            max_concurrency=maximum,
            scale_per_min=scale,
            target_duration_s=target_duration_ms / 1000,
            warm_environments=maximum if steady else 0,
            jobs_write_throughput=writes("jobs"),
            due_write_throughput=writes("jobs.due"),
            runs_write_throughput=writes("runs"),
            runs_writes_per_run=4 if self.open_index else 3,
        )


def read_template(path: Path) -> Deployment:
    """Read a synthesized template (a file, or a cdk.out directory holding exactly one stack).

    Raises :class:`ConfigError` naming what is missing.
    """
    if path.is_dir():
        templates = sorted(path.glob("*.template.json"))
        if len(templates) != 1:
            raise ConfigError(f"{path} holds {len(templates)} templates; name one with --template")
        path = templates[0]
    try:
        resources: dict[str, Any] = json.loads(path.read_text())["Resources"]
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"cannot read a CloudFormation template from {path}: {exc}") from exc
    scheduler_id, scheduler = _function(resources, SCHEDULER_DESCRIPTION)
    worker_id, worker = _function(resources, WORKER_DESCRIPTION)
    env = scheduler.get("Environment", {}).get("Variables", {})
    mapping = _event_source(resources, worker_id)
    pollers = mapping.get("ProvisionedPollerConfig") or {}
    reserved = worker.get("ReservedConcurrentExecutions")
    # standard mode: the event source's maximum (1,000 when unset); provisioned: what the pollers drive
    driven = int(pollers.get("MaximumPollers", 0)) * int(value("lambda_invocations_per_poller"))
    maximum = (
        (mapping.get("ScalingConfig") or {}).get("MaximumConcurrency")
        or driven
        or int(value("lambda_sqs_max_concurrency"))
    )
    return Deployment(
        shards=int(env.get("PUNCTUAL_SHARDS", 16)),
        lookahead_ms=int(env.get("PUNCTUAL_LOOKAHEAD_MS", 3_000)),
        scheduler_instances=_instances(resources, scheduler_id),
        batch_size=int(mapping.get("BatchSize", 10)),
        max_concurrency=min(int(maximum), int(reserved)) if reserved else int(maximum),
        min_pollers=int(pollers.get("MinimumPollers", 0)),
        max_pollers=int(pollers.get("MaximumPollers", 0)),
        reserved_concurrency=int(reserved or 0),
        open_index=str(env.get("PUNCTUAL_OPEN_INDEX", "true")).lower() == "true",
        warm_writes=_warm_writes(resources),
        # the dispatch queue's Fargate fleet; the long-run queue's service never takes the burst
        fargate_tasks=sum(
            int(r.get("Properties", {}).get("DesiredCount", 0))
            for name, r in resources.items()
            if r["Type"] == "AWS::ECS::Service" and "LongRun" not in name
        ),
    )


def _function(resources: dict[str, Any], description: str) -> tuple[str, dict[str, Any]]:
    for key, resource in resources.items():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::Lambda::Function" and str(props.get("Description", "")).startswith(description):
            return key, props
    raise ConfigError(f"the template has no function described as {description!r}: not a Punctual stack?")


def _event_source(resources: dict[str, Any], function_id: str) -> dict[str, Any]:
    for resource in resources.values():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::Lambda::EventSourceMapping" and props.get("FunctionName") == {"Ref": function_id}:
            return dict(props)
    raise ConfigError("the worker function has no SQS event source in the template")


def _instances(resources: dict[str, Any], scheduler_id: str) -> int:
    """K from the scheduler rules' target input ``{"instance": i, "instances": K, "time": <time>}``
    (an input template: the event's time goes in as a JSON string)."""
    for resource in resources.values():
        if resource["Type"] != "AWS::Events::Rule":
            continue
        for target in resource.get("Properties", {}).get("Targets", []):
            arn = json.dumps(target.get("Arn"))
            text = target.get("Input") or target.get("InputTransformer", {}).get("InputTemplate")
            if scheduler_id in arn and text:
                return int(json.loads(text.replace("<time>", '""'))["instances"])
    raise ConfigError("the template has no scheduler rule with an instances input")


def _warm_writes(resources: dict[str, Any]) -> dict[str, int]:
    names = {("job_id",): "jobs", ("job_id", "scheduled_at"): "runs", ("pk", "sk"): "leases"}
    found: dict[str, int] = {}
    for resource in resources.values():
        if resource["Type"] != "AWS::DynamoDB::Table":
            continue
        props = resource["Properties"]
        table = names.get(tuple(k["AttributeName"] for k in props["KeySchema"]))
        if table is None:
            continue
        if units := (props.get("WarmThroughput") or {}).get("WriteUnitsPerSecond"):
            found[table] = int(units)
        for index in props.get("GlobalSecondaryIndexes", []):
            if units := (index.get("WarmThroughput") or {}).get("WriteUnitsPerSecond"):
                found[f"{table}.{index['IndexName']}"] = int(units)
    return found
