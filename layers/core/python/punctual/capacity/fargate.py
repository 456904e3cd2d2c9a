"""The Fargate worker tier: ``punctual worker`` tasks consuming the dispatch queue, sized from measured CPU.

One task is one process (Python runs the worker on one core): 1 vCPU, 2 GB. A run costs the worker
``worker_cpu_ms_per_run`` of CPU on the aws engine (``punctual bench aws``: receive, lease, the job's
read, the target call, finish and delete; measured against a moto server in another process).
The share before the instant (``worker_cpu_prestart_share``: receive, lease, read) is spent while
the run is pre-leased: the scheduler makes its message visible up to ``prelease_s`` + 1 s early
and the worker leases it on arrival and holds it (``punctual.execution.batch``), so at the instant
only the target call is left. The fleet must:

- do a minute's work in a minute: ``burst x CPU per run x attempts / (interval x utilization)`` vCPUs;
- receive and lease the burst before its instant: the burst model replays it (messages visible up to
  ``prelease_s`` + 1 s early, leased at the fleet's ``vCPUs / pre-instant CPU per run``), and the
  plan takes the fewest tasks whose steady p99 start lateness meets the target on ``cpu_utilization``
  (70 %) of their vCPU: the headroom the scheduler fleet is sized with too. The lateness it reports is
  the burst model's on the whole vCPU (what ``punctual burst-model`` gives for the deployed stack).

The fleet is fixed for a burst every minute (tasks cannot start in seconds). For hourly bursts the
stack's schedule raises it before the hour (minute 59) and lowers it after (minute 5), and one
task carries the hour in between. The long-run queue's service (runs longer than a Lambda may take)
is one task more. Each task has a public IPv4 address (public subnets, no NAT gateway: cheaper).
"""

from __future__ import annotations

import math
from dataclasses import replace

from punctual.capacity.constants import value
from punctual.capacity.figures import QuotaWarning, Scheduling, Throughput, Workers
from punctual.capacity.load import Load
from punctual.capacity.simulate import simulate
from punctual.capacity.workers import (
    FARGATE_TASK_VCPU,
    HEADROOM,
    IDLE_LAMBDA_WORKER,
    account_concurrency,
    in_flight,
    invocation_seconds,
    p99,
    plan_deployment,
)

PRELEASE_S = 10  # the longest pre-leasing Settings.prelease_s allows: the most time to lease before the instant
MAX_TASKS = 100  # infra.config: fargate_worker_count / fargate_worker_max_count
MAX_IN_FLIGHT = 20_000  # infra.config: fargate_worker_concurrency
HOURLY_S = 3_600  # bursts this far apart or more: the hourly warm-up schedule instead of an always-on fleet
LONG_RUN_TASKS = 1


def cpu_s_per_run(attempts: float) -> float:
    """Worker CPU seconds per run, its retries' attempts included."""
    return value("worker_cpu_ms_per_run") / 1000 * attempts


def size_fargate(
    load: Load,
    s: Scheduling,
    tables: list[Throughput],
    warnings: list[QuotaWarning],
    *,
    attempts: float,
    provisioned_writes: dict[str, int] | None = None,
) -> Workers:
    """The fewest tasks meeting the target (see the module docstring); at most 100, warned above."""
    minute_work = load.burst_runs * cpu_s_per_run(attempts)
    at_least = max(1, math.ceil(minute_work / (load.burst_interval_s * value("cpu_utilization") * FARGATE_TASK_VCPU)))

    def meets(tasks: int) -> tuple[bool, float]:
        # sized with headroom: the tasks must meet the target on cpu_utilization of their vCPU
        deployment = plan_deployment(load, s, _workers(load, s, tasks, []), tables, provisioned_writes)
        derated = replace(deployment, fargate_vcpu=deployment.fargate_vcpu * value("cpu_utilization"))
        steady = simulate(
            derated.burst(
                load.peak_runs_per_second,
                burst_seconds=load.burst_seconds,
                target_duration_ms=load.target_duration_ms,
                steady=True,
            )
        )
        return p99(steady) <= load.target_latency_ms, p99(steady)

    # grow by a quarter until the target is met, then bisect back to the fewest tasks that meet it
    failed, tasks = at_least - 1, min(at_least, MAX_TASKS)
    ok, late = meets(tasks)
    while not ok and tasks < MAX_TASKS:
        failed, tasks = tasks, min(MAX_TASKS, max(tasks + 1, math.ceil(tasks * 1.25)))
        ok, late = meets(tasks)
    if not ok:
        warnings.append(
            QuotaWarning(
                "fargate_tasks",
                f"{MAX_TASKS} Fargate worker tasks (the stack's bound) cannot start the burst within"
                f" {load.target_latency_ms:,} ms (p99 {late:,.0f} ms): split the load across stacks",
            )
        )
        return _workers(load, s, tasks, warnings)
    while tasks - failed > 1:
        middle = (failed + tasks) // 2
        if meets(middle)[0]:
            tasks = middle
        else:
            failed = middle
    return _workers(load, s, tasks, warnings)


def _workers(load: Load, s: Scheduling, tasks: int, warnings: list[QuotaWarning]) -> Workers:
    hourly = load.burst_interval_s >= HOURLY_S
    # every run of the burst is held from its pre-lease to its finish: room for the burst, with headroom
    per_task = min(MAX_IN_FLIGHT, math.ceil(load.burst_runs * HEADROOM / tasks))
    workers = Workers(
        kind="fargate",
        in_flight_runs=in_flight(load, warnings),
        sqs_in_flight_limit=int(value("sqs_in_flight")),
        batch_size=int(value("sqs_batch")),
        invocation_s=round(invocation_seconds(load, int(value("sqs_batch"))), 3),
        concurrency=load.burst_runs,
        mode="fargate",
        max_concurrency=tasks * per_task,
        min_pollers=0,
        max_pollers=0,
        reserved_concurrency=0,
        account_concurrency_needed=int(value("lambda_account_concurrency")),
        fargate_tasks=1 if hourly else tasks,
        fargate_in_flight_per_task=per_task,
        fargate_prelease_s=PRELEASE_S,
        fargate_prewarm_tasks=tasks if hourly else 0,
        fargate_long_run_tasks=LONG_RUN_TASKS,
    )
    # the Lambda worker stays deployed with its event source disabled, reserved at the smallest (2)
    return replace(
        workers,
        account_concurrency_needed=account_concurrency(IDLE_LAMBDA_WORKER + 2 * s.scheduler_instances, warnings),
    )


def task_hours(w: Workers, load: Load) -> float:
    """Task-hours a month of the dispatch queue's fleet: always on, or the hourly warm-up schedule
    (the prewarm count from minute 59 to minute 5, one task the rest of the hour)."""
    hours = value("month_hours")
    if not w.fargate_prewarm_tasks:
        return w.fargate_tasks * hours
    warm = 6 / 60
    return hours * (w.fargate_prewarm_tasks * warm + w.fargate_tasks * (1 - warm))
