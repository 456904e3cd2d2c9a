"""A load simulation of one top-of-minute burst on the AWS path: the expected start-lateness curve.

A planning tool, not a measurement: AWS cannot run here, so this replays the documented scaling
rules and limits (``punctual.capacity.constants``) against the settings a deployment was
synthesized with. What it models, in order:

1. **Claim.** ``burst_runs_per_second`` runs are due at each of ``burst_seconds`` whole seconds.
   A run can be claimed once it is within ``lookahead_ms`` of its time; the scheduler fleet claims
   in due order at ``min(fleet rate, due-index partitions, warm throughput)``, where the fleet rate
   is set by its busiest instance, the one owning ``ceil(shards / instances)`` shards
   (:func:`fleet_claim_rate`).
2. **Dispatch.** A claimed run's message becomes visible at its second minus the SQS delay's
   rounding (up to 1 s early, spread evenly), or at once when it was claimed late.
3. **Execute.** Worker invocations take up to ``batch_size`` visible messages each; a run starts at
   ``max(received, its time) + dispatch overhead`` (+ a cold start for a new environment) and the
   invocation is busy until its last run finished. Concurrency starts at ``ready_concurrency`` and
   grows by ``scale_per_min`` while messages wait, up to ``max_concurrency`` (standard or
   provisioned mode of the SQS event source), or is fixed (Fargate tasks). Lease and finish
   writes are limited by the runs table's write throughput (warm throughput or a pre-warmed value).

Every run's lateness is ``start - scheduled``; the curve is lateness by percentile of the burst
and runs started over time. Assumptions the docs list: no throttling retries beyond the rate
limits, targets answer in a fixed time, no failures, one dispatch queue.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from punctual.capacity.constants import value

STEP_S = 0.01  # simulation time step
MAX_SIMULATED_S = 3_600.0  # a burst not started within an hour is reported as unstarted
PERCENTILES = (50.0, 90.0, 99.0, 99.9, 100.0)
CURVE_PERCENTS = (*range(5, 100, 5), 99.0, 99.9, 100.0)
MAX_SIMULATED_RUNS = 20_000  # larger bursts are simulated scaled down (see simulate)


@dataclass(frozen=True, slots=True)
class BurstSettings:
    """What the simulation needs from a deployment (see ``punctual.capacity.synth`` for cdk.out)."""

    burst_runs_per_second: int
    burst_seconds: int = 1
    lookahead_ms: int = 5_000
    scheduler_instances: int = 16
    # the busiest instance's claims/s (punctual.capacity.fleet.instance_claim_rate); default: one vCPU, all claims
    claims_per_instance: float = field(default_factory=lambda: 1000 / value("scheduler_cpu_ms_per_claim"))
    due_shards: int = 128
    batch_size: int = 10
    worker_mode: str = "standard"  # standard | provisioned | fargate
    ready_concurrency: int = 5  # invocations (or Fargate slots) ready when the burst begins
    max_concurrency: int = 1_000
    scale_per_min: float = 300.0  # concurrency added per minute while messages wait (0: fixed)
    fargate_runs_per_s: float = 0.0  # start-rate cap of a Fargate fleet (0: none): its receives and leases
    early_s: float = 0.0  # pre-leasing: messages turn visible up to early_s + 1 s before their instant
    target_duration_s: float = 0.5
    dispatch_overhead_s: float = 0.05  # receive to invocation start, warm
    cold_start_s: float = 0.8  # a new execution environment (Python, two layers)
    warm_environments: int = 0  # environments already initialized (steady state: every minute)
    jobs_write_throughput: float = field(default_factory=lambda: value("ddb_warm_writes"))
    due_write_throughput: float = field(default_factory=lambda: value("ddb_warm_writes"))
    runs_write_throughput: float = field(default_factory=lambda: value("ddb_warm_writes"))
    runs_writes_per_run: int = 4  # insert, lease, finish (+ open index entries): counts.WriteUnits
    in_flight_limit: int = field(default_factory=lambda: int(value("sqs_in_flight")))  # one standard queue

    def claim_rate(self) -> float:
        """Runs/s the fleet can claim: instances, the due index's partitions and warm throughputs."""
        partitions = self.due_shards * value("ddb_partition_wru") / 2  # 2 index units per claim
        return min(
            fleet_claim_rate(self.scheduler_instances, self.due_shards, self.claims_per_instance),
            partitions,
            self.jobs_write_throughput,  # 1 unit per advance
            self.due_write_throughput / 2,
        )


def fleet_claim_rate(instances: int, shards: int, per_instance: float) -> float:
    """Runs/s ``instances`` scheduler instances claim from ``shards`` equally loaded shards.

    Instance i owns the shards with shard % instances == i, so the busiest owns
    ceil(shards / instances) of them and claims that share of the runs at ``per_instance``: the
    fleet finishes when it does. 14 instances over 32 shards claim 300 x 32 / 3 = 3,200 runs/s,
    not 14 x 300 = 4,200; 16 instances claim 4,800.
    """
    busiest = math.ceil(shards / max(1, instances))
    return per_instance * shards / busiest


@dataclass(frozen=True, slots=True)
class BurstResult:
    runs: int
    started: int
    lateness_ms: dict[str, float]  # "p50", "p90", "p99", "p99.9", "max"
    curve: list[dict[str, float]]  # start lateness (ms) by percent of the burst's runs
    claim_rate: float
    claimed_late: int  # runs claimed after their time
    peak_concurrency: int
    execution_rate_cap: float  # runs/s the runs table's write throughput allows

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def simulate(settings: BurstSettings) -> BurstResult:
    """Replay one burst with ``settings``; deterministic (no randomness, fixed time step).

    A burst of more than 20,000 runs is simulated scaled down by k (runs, concurrency, rates and
    throughputs all divided by k): lateness is a ratio of work to rate, so it scales with them, up
    to the granularity of one batch. Counts in the result are scaled back up.
    """
    k = max(1, math.ceil(settings.burst_runs_per_second * settings.burst_seconds / MAX_SIMULATED_RUNS))
    scaled = _scaled(settings, k)
    due = _due_times(scaled)
    claimed, claimed_late = _claim_times(due, scaled)
    early = scaled.early_s
    available = sorted(
        (max(claim, t - early - _early(i)), t) for i, (t, claim) in enumerate(zip(due, claimed, strict=True))
    )
    starts, peak = _execute(available, scaled)
    lateness = sorted((start - t) * 1000 for start, t in starts)
    return BurstResult(
        runs=len(due) * k,
        started=len(lateness) * k,
        lateness_ms=_percentiles(lateness),
        curve=_curve(lateness),
        claim_rate=round(settings.claim_rate(), 1),
        claimed_late=claimed_late * k,
        peak_concurrency=peak * k,
        execution_rate_cap=round(_execution_cap(settings), 1),
    )


def _scaled(s: BurstSettings, k: int) -> BurstSettings:
    if k == 1:
        return s
    return replace(
        s,
        burst_runs_per_second=max(1, s.burst_runs_per_second // k),
        claims_per_instance=s.claims_per_instance / k,
        due_shards=s.due_shards,  # the partition bound is scaled through the throughputs below
        ready_concurrency=max(1, s.ready_concurrency // k),
        max_concurrency=max(1, s.max_concurrency // k),
        scale_per_min=s.scale_per_min / k,
        fargate_runs_per_s=s.fargate_runs_per_s / k,
        warm_environments=s.warm_environments // k,
        jobs_write_throughput=s.jobs_write_throughput / k,
        due_write_throughput=min(s.due_write_throughput, s.due_shards * value("ddb_partition_wru")) / k,
        runs_write_throughput=s.runs_write_throughput / k,
        in_flight_limit=max(1, s.in_flight_limit // k),
    )


def _due_times(s: BurstSettings) -> list[float]:
    return [float(second) for second in range(s.burst_seconds) for _ in range(s.burst_runs_per_second)]


def _early(i: int) -> float:
    # SQS delays are whole seconds, rounded down: a message is visible up to 1 s early, evenly spread
    return (i * 0.6180339887) % 1.0


def _claim_times(due: list[float], s: BurstSettings) -> tuple[list[float], int]:
    rate = s.claim_rate()
    lookahead = s.lookahead_ms / 1000
    claimed: list[float] = []
    clock = -math.inf
    late = 0
    for t in due:
        clock = max(t - lookahead, clock + 1 / rate)
        claimed.append(clock)
        late += clock > t
    return claimed, late


def _execution_cap(s: BurstSettings) -> float:
    execution_writes = max(1, s.runs_writes_per_run - 1)  # the insert was paid at claim time
    spare = s.runs_write_throughput - min(s.claim_rate(), s.burst_runs_per_second)
    return max(spare, s.runs_write_throughput / 4) / execution_writes


def _execute(available: list[tuple[float, float]], s: BurstSettings) -> tuple[list[tuple[float, float]], int]:
    """Start every run; returns (start, scheduled) pairs and the peak concurrency used."""
    waiting: deque[tuple[float, float]] = deque()
    busy: list[tuple[float, int]] = []  # (end time, runs) of running invocations
    in_flight = 0  # messages received and not yet deleted (the queue's in-flight count)
    starts: list[tuple[float, float]] = []
    cap = _execution_cap(s)
    rate_cap = min(cap, s.fargate_runs_per_s) if s.fargate_runs_per_s else cap
    tokens = rate_cap * STEP_S
    warm = s.warm_environments
    fargate = s.worker_mode == "fargate"
    index, peak = 0, 0
    t = available[0][0] if available else 0.0
    backlog_since: float | None = None
    end = t + MAX_SIMULATED_S
    while (index < len(available) or waiting) and t < end:
        while index < len(available) and available[index][0] <= t:
            waiting.append(available[index])
            index += 1
        while busy and busy[0][0] <= t:
            in_flight -= heapq.heappop(busy)[1]
        if waiting and backlog_since is None:
            backlog_since = t
        concurrency = _concurrency(s, t - backlog_since if backlog_since is not None else 0.0)
        tokens = min(tokens + rate_cap * STEP_S, max(rate_cap * STEP_S, s.batch_size))
        # Lambda: one invocation per batch, up to the concurrency; a Fargate fleet: runs held, up to its slots
        room = concurrency * s.batch_size - in_flight if fargate else (s.batch_size if len(busy) < concurrency else 0)
        while waiting and room >= 1 and tokens >= 1 and in_flight < s.in_flight_limit:
            size = min(s.batch_size, len(waiting), int(tokens), s.in_flight_limit - in_flight, room)
            room = room - size if fargate else (s.batch_size if len(busy) + 1 < concurrency else 0)
            batch = [waiting.popleft() for _ in range(size)]
            in_flight += size
            tokens -= len(batch)
            overhead = s.dispatch_overhead_s
            if warm > 0:
                warm -= 1
            else:
                overhead += s.cold_start_s
            run_starts = [max(t + overhead, scheduled) for _, scheduled in batch]
            starts += [(start, scheduled) for start, (_, scheduled) in zip(run_starts, batch, strict=True)]
            heapq.heappush(busy, (max(run_starts) + s.target_duration_s + value("worker_batch_overhead_s"), size))
            peak = max(peak, len(busy))
        t += STEP_S
    return starts, peak


def _concurrency(s: BurstSettings, waited_s: float) -> int:
    grown = s.ready_concurrency + s.scale_per_min * waited_s / 60
    return int(min(s.max_concurrency, max(s.ready_concurrency, grown)))


def _percentiles(sorted_ms: list[float]) -> dict[str, float]:
    if not sorted_ms:
        return {}
    return {("max" if p == 100.0 else f"p{p:g}"): _at(sorted_ms, p) for p in PERCENTILES}


def _curve(sorted_ms: list[float]) -> list[dict[str, float]]:
    """Start lateness at each percent of the burst's runs: the curve to plot."""
    if not sorted_ms:
        return []
    return [{"percent": p, "lateness_ms": _at(sorted_ms, p)} for p in CURVE_PERCENTS]


def _at(sorted_ms: list[float], p: float) -> float:
    i = min(len(sorted_ms) - 1, max(0, math.ceil(p / 100 * len(sorted_ms)) - 1))
    return round(sorted_ms[i], 1)
