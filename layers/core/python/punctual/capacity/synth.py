"""The burst model's input from a synthesized stack: ``cdk.out/<stack>.template.json``.

What ``cdk synth`` wrote is what ``cdk deploy`` deploys, so the simulation reads the settings from
there rather than from the context values: the scheduler's ``PUNCTUAL_SHARDS``,
``PUNCTUAL_LOOKAHEAD_MS`` and memory, the scheduler instances from its EventBridge targets' input,
the worker's SQS event source (batch size, maximum concurrency, provisioned pollers, enabled or
not) and reserved concurrency, the Fargate worker service that consumes the dispatch queue when
the event source is disabled (its tasks at the least, their vCPU, ``--max-in-flight`` and
``PUNCTUAL_PRELEASE_S``), and each table's and index's billing mode, provisioned write capacity
and warm throughput. ``punctual capacity`` builds the same :class:`Deployment` from its plan
(``punctual.capacity.workers.plan_deployment``), so the plan's lateness and the synthesized
stack's are one computation on the same figures.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from punctual.capacity.constants import value
from punctual.capacity.counts import per_run
from punctual.capacity.fleet import instance_claim_rate
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
    fargate_tasks: int  # the dispatch queue's Fargate service: tasks at the least (0: none)
    scheduler_memory_mb: int = 1_769
    lambda_workers: bool = True  # the Lambda worker's event source is enabled (else the Fargate service consumes)
    fargate_vcpu: float = 1.0  # per task
    fargate_in_flight: int = 0  # per task (punctual worker --max-in-flight)
    prelease_s: int = 0  # the workers lease runs up to this long ahead (PUNCTUAL_PRELEASE_S)
    provisioned_writes: dict[str, int] | None = (
        None  # provisioned mode: "table" or "table.index" -> WCU (None: on-demand)
    )

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

    @property
    def claims_per_instance(self) -> float:
        """The busiest scheduler instance's claims/s at its memory (punctual.capacity.fleet)."""
        return instance_claim_rate(self.shards_per_instance, self.scheduler_memory_mb)

    @property
    def fargate_runs_per_s(self) -> float:
        """What the Fargate fleet receives and leases per second: its vCPUs over the measured CPU a run
        takes before its instant (``worker_cpu_ms_per_run`` x ``worker_cpu_prestart_share``)."""
        before = value("worker_cpu_ms_per_run") * value("worker_cpu_prestart_share") / 1000
        return self.fargate_tasks * self.fargate_vcpu / before

    def burst(
        self, runs_per_second: int, *, burst_seconds: int = 1, target_duration_ms: int = 500, steady: bool
    ) -> BurstSettings:
        """The simulation's input for a burst of ``runs_per_second`` on this deployment."""
        common: dict[str, Any] = {
            "burst_runs_per_second": runs_per_second,
            "burst_seconds": burst_seconds,
            "lookahead_ms": self.lookahead_ms,
            "scheduler_instances": self.scheduler_instances,
            "claims_per_instance": self.claims_per_instance,
            "due_shards": self.shards,
            "batch_size": self.batch_size,
            "target_duration_s": target_duration_ms / 1000,
            "jobs_write_throughput": self._writes("jobs", steady),
            "due_write_throughput": self._writes("jobs.due", steady),
            "runs_write_throughput": self._writes("runs", steady),
            "runs_writes_per_run": self._runs_units_per_run(),
        }
        if not self.lambda_workers:
            # a fixed fleet: every task up, its slots batch_size runs each; no cold start (a long-running process)
            slots = max(1, self.fargate_tasks * self.fargate_in_flight // self.batch_size)
            return BurstSettings(
                **common,
                worker_mode="fargate",
                ready_concurrency=slots,
                max_concurrency=slots,
                scale_per_min=0.0,
                fargate_runs_per_s=self.fargate_runs_per_s,
                early_s=float(self.prelease_s),
                cold_start_s=0.0,
                warm_environments=slots,
            )
        per_poller = int(value("lambda_invocations_per_poller"))
        maximum = self.worker_concurrency
        if self.min_pollers:
            ready = self.min_pollers * per_poller
            scale = value("lambda_poller_scale_per_min")
        else:
            ready = int(value("lambda_sqs_initial_batches"))
            scale = value("lambda_sqs_scale_per_min")
        return BurstSettings(
            **common,
            worker_mode="provisioned" if self.min_pollers else "standard",
            ready_concurrency=maximum if steady else min(ready, maximum),
            max_concurrency=maximum,
            scale_per_min=scale,
            warm_environments=maximum if steady else 0,
        )

    def _writes(self, name: str, steady: bool) -> float:
        """Writes/s ``name`` takes at the burst.

        On-demand: its warm throughput after a deploy; steady (bursts every minute for hours), what
        on-demand has grown to, up to the table-level quota. Provisioned: what its partitions take
        (1,000 WCU/s each) on burst credits: the warm throughput it was pre-warmed to, or the
        partitions its provisioned capacity alone gives.
        """
        warm = self.warm_writes.get(name, 0)
        if self.provisioned_writes is not None:
            units = self.provisioned_writes.get(name, 1)
            partition = value("ddb_partition_wru")
            return float(max(warm, partition * -(-units // int(partition))))
        default = value("ddb_table_quota_wru") if steady else value("ddb_warm_writes")
        return max(warm, default)

    def _runs_units_per_run(self) -> int:
        """Write units a run takes on the runs table and its open index (``punctual.capacity.counts``)."""
        w = per_run(open_index=self.open_index).writes
        return w.insert_runs + w.insert_open + w.lease_runs + w.finish_runs + w.finish_open


# What makes a cdk.out from a checkout (`make synth` installs the CDK CLI from package.json first);
# add the context flags `punctual capacity` prints to model a sized stack.
SYNTH_COMMAND = "make synth, or npx cdk synth --no-notices -q"


def read_template(path: Path) -> Deployment:
    """Read a synthesized template (a file, or a cdk.out directory holding exactly one stack).

    Raises :class:`ConfigError` naming what is missing (no cdk.out yet: how to synthesize one).
    """
    if not path.exists():
        raise ConfigError(f"no {path}: synthesize the stack first ({SYNTH_COMMAND}), then run this again")
    if path.is_dir():
        templates = sorted(path.glob("*.template.json"))
        if not templates:
            raise ConfigError(f"{path} holds no template: synthesize the stack first ({SYNTH_COMMAND})")
        if len(templates) > 1:
            names = ", ".join(t.name for t in templates)
            raise ConfigError(f"{path} holds {len(templates)} templates ({names}): name one with --cdk-out")
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
    fargate = _fargate_service(resources)
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
        warm_writes=_table_units(resources, "WarmThroughput", "WriteUnitsPerSecond"),
        fargate_tasks=fargate.tasks,
        scheduler_memory_mb=int(scheduler.get("MemorySize", 128)),
        lambda_workers=mapping.get("Enabled", True) is not False,
        fargate_vcpu=fargate.vcpu,
        fargate_in_flight=fargate.in_flight,
        prelease_s=fargate.prelease_s,
        provisioned_writes=(
            _table_units(resources, "ProvisionedThroughput", "WriteCapacityUnits") if _provisioned(resources) else None
        ),
    )


@dataclass(frozen=True, slots=True)
class _Fargate:
    tasks: int = 0
    vcpu: float = 1.0
    in_flight: int = 0
    prelease_s: int = 0


def _fargate_service(resources: dict[str, Any]) -> _Fargate:
    """The Fargate service consuming the dispatch queue (the long-run queue's never takes the burst):
    its tasks at the burst (its auto scaling minimum, or the scheduled warm-up before the hour; else its
    desired count), their vCPU, runs in flight and pre-leasing."""
    found = [
        (k, r["Properties"]) for k, r in resources.items() if r["Type"] == "AWS::ECS::Service" and "LongRun" not in k
    ]
    if not found:
        return _Fargate()
    service_id, service = found[0]
    tasks = int(service.get("DesiredCount", 0))
    for resource in resources.values():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::ApplicationAutoScaling::ScalableTarget" and service_id in json.dumps(
            props.get("ResourceId")
        ):
            # at the burst: auto scaling's minimum, or what the schedule raises it to before the hour
            scheduled = [
                int(action["ScalableTargetAction"].get("MinCapacity", 0))
                for action in props.get("ScheduledActions", [])
            ]
            tasks = max([int(props["MinCapacity"]), *scheduled])
    definition = resources[service["TaskDefinition"]["Ref"]]["Properties"]
    (container,) = definition["ContainerDefinitions"]
    command = list(container.get("Command", []))
    in_flight = int(command[command.index("--max-in-flight") + 1]) if "--max-in-flight" in command else 0
    env = {e["Name"]: e["Value"] for e in container.get("Environment", []) if isinstance(e.get("Value"), str)}
    return _Fargate(
        tasks=tasks,
        vcpu=int(definition.get("Cpu", 1024)) / 1024,
        in_flight=in_flight,
        prelease_s=int(env.get("PUNCTUAL_PRELEASE_S", 0)),
    )


def _provisioned(resources: dict[str, Any]) -> bool:
    """Provisioned mode: the tables carry ProvisionedThroughput (BillingMode PROVISIONED is the default)."""
    return any(
        "ProvisionedThroughput" in r["Properties"] for r in resources.values() if r["Type"] == "AWS::DynamoDB::Table"
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


def _table_units(resources: dict[str, Any], prop: str, key: str) -> dict[str, int]:
    """``{"table" or "table.index": units}`` of ``prop``'s ``key`` (e.g. WarmThroughput's writes/s)
    on each Punctual table and index that sets it."""
    names = {("job_id",): "jobs", ("job_id", "scheduled_at"): "runs", ("pk", "sk"): "leases"}
    found: dict[str, int] = {}
    for resource in resources.values():
        if resource["Type"] != "AWS::DynamoDB::Table":
            continue
        props = resource["Properties"]
        table = names.get(tuple(k["AttributeName"] for k in props["KeySchema"]))
        if table is None:
            continue
        if units := (props.get(prop) or {}).get(key):
            found[table] = int(units)
        for index in props.get("GlobalSecondaryIndexes", []):
            if units := (index.get(prop) or {}).get(key):
                found[f"{table}.{index['IndexName']}"] = int(units)
    return found
