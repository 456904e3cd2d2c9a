"""The scheduler fleet: its lookahead, instances, memory and due shards, from the measured CPU of a claim.

A scheduler instance is one Lambda invocation a minute that claims its shards' due jobs every
second. Its CPU goes to claims (``scheduler_cpu_ms_per_claim``: query share, insert, send share,
advance) and to the shards it owns (``scheduler_cpu_ms_per_poll``: one query of each owned shard
every tick, and a lease renewal every 3 s, costed as a third of a poll), both measured by
``punctual bench aws``. A Lambda function has a vCPU share proportional to its memory
(``lambda_gb_per_vcpu`` = one vCPU); Python claims on one core, so an instance is useful up to one
vCPU and the fleet grows by instances above that.

The lookahead spreads the burst's claims: runs due at second k are claimable from k - lookahead,
so a longer lookahead claims the same burst at a lower rate with fewer, smaller instances. The plan
takes the shortest lookahead (5 s steps, up to the interval less 5 s, at most 60 s) whose fleet is
the cheapest (instances x memory), then the fewest instances. A claimed run is only a row and a
delayed message until its instant: the worker's lease at the instant honours a pause, delete or
change made after the claim, so claiming early changes no run's outcome.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from punctual.capacity.constants import value
from punctual.capacity.counts import claim_runs_of, claim_window_for
from punctual.capacity.figures import QuotaWarning, Scheduling
from punctual.capacity.load import Load
from punctual.capacity.simulate import fleet_claim_rate

MIN_LOOKAHEAD_MS = 5_000
MAX_LOOKAHEAD_MS = 60_000  # the scheduler's own bound (Settings.lookahead_ms)
LOOKAHEAD_STEP_MS = 5_000
MAX_SCHEDULER_INSTANCES = 100  # the CDK app's bound
MAX_SHARDS = 4096
MIN_SHARDS = 16
MEMORY_STEP_MB = 64
RENEWALS_PER_POLL = 1 / 3  # a shard lease renewed every 3 s, per 1 s tick's query


def full_vcpu_mb() -> int:
    return round(value("lambda_gb_per_vcpu") * 1000)  # 1,769 MB


def claim_rate_needed(load: Load, lookahead_ms: int) -> float:
    """Runs/s that claim every run of the burst by its time.

    Runs due at second k (0 <= k < S) become claimable at k - lookahead; all runs due by second t
    must be claimed by t: C * (t + lookahead) >= R * (t + 1) for every t, the tightest at the last
    second: C = R * S / (S - 1 + lookahead).
    """
    lookahead_s = max(lookahead_ms / 1000, 1.0)
    return load.peak_runs_per_second * load.burst_seconds / (load.burst_seconds - 1 + lookahead_s)


def instance_claim_rate(owned_shards: int, memory_mb: int, utilization: float = 1.0) -> float:
    """Claims/s one instance makes with ``memory_mb`` (its vCPU share, at most one) while it polls
    ``owned_shards`` every second; ``utilization`` < 1 keeps headroom (the plan's sizing)."""
    vcpu = min(1.0, memory_mb / full_vcpu_mb()) * utilization
    polling = owned_shards * (1 + RENEWALS_PER_POLL) * value("scheduler_cpu_ms_per_poll") / 1000
    return max(0.0, vcpu - polling) * 1000 / value("scheduler_cpu_ms_per_claim")


def memory_for(claims_per_s: float, owned_shards: int) -> int | None:
    """The smallest memory (64 MB steps, at least ``scheduler_min_memory_mb``) whose instance makes
    ``claims_per_s`` at the planned utilization; None if one vCPU cannot."""
    utilization = value("cpu_utilization")
    polling = owned_shards * (1 + RENEWALS_PER_POLL) * value("scheduler_cpu_ms_per_poll") / 1000
    vcpu = (claims_per_s * value("scheduler_cpu_ms_per_claim") / 1000 + polling) / utilization
    if vcpu > 1.0:
        return None
    stepped = math.ceil(vcpu * full_vcpu_mb() / MEMORY_STEP_MB) * MEMORY_STEP_MB
    return min(full_vcpu_mb(), max(int(value("scheduler_min_memory_mb")), stepped))


@dataclass(frozen=True, slots=True)
class Fleet:
    lookahead_ms: int
    claim_rate: float
    instances: int
    memory_mb: int
    due_shards: int

    @property
    def cost_weight(self) -> int:
        return self.instances * self.memory_mb  # MB running all month: what the fleet costs


def plan_fleet(load: Load, warnings: list[QuotaWarning]) -> Fleet:
    """The cheapest fleet that claims the burst in time (see the module docstring)."""
    longest = max(MIN_LOOKAHEAD_MS, min(MAX_LOOKAHEAD_MS, load.burst_interval_s * 1000) - LOOKAHEAD_STEP_MS)
    best: Fleet | None = None
    for lookahead in range(MIN_LOOKAHEAD_MS, longest + 1, LOOKAHEAD_STEP_MS):
        fleet = _cheapest(load, lookahead)
        if fleet is not None and (best is None or fleet.cost_weight < best.cost_weight):
            best = fleet
    if best is not None:
        return best
    claim = claim_rate_needed(load, longest)
    shards = due_shards(claim, MAX_SCHEDULER_INSTANCES, warnings)
    warnings.append(
        QuotaWarning(
            "scheduler_instances",
            f"claiming {load.burst_runs:,} runs needs more than {MAX_SCHEDULER_INSTANCES} scheduler instances"
            f" even with a {longest // 1000} s lookahead: runs will be claimed late",
        )
    )
    return Fleet(longest, claim, MAX_SCHEDULER_INSTANCES, full_vcpu_mb(), shards)


def _cheapest(load: Load, lookahead_ms: int) -> Fleet | None:
    claim = claim_rate_needed(load, lookahead_ms)
    best: Fleet | None = None
    for instances in range(1, MAX_SCHEDULER_INSTANCES + 1):
        shards = due_shards(claim, instances, [])
        owned = math.ceil(shards / instances)
        memory = memory_for(claim * owned / shards, owned)
        if memory is None:
            continue
        fleet = Fleet(lookahead_ms, claim, instances, memory, shards)
        if best is None or fleet.cost_weight < best.cost_weight:
            best = fleet
    return best


def due_shards(claim: float, instances: int, warnings: list[QuotaWarning]) -> int:
    """Shards of the due index: each claim moves its job's key (2 index writes), and a shard (one
    partition key) may use a third of a partition; at least 16 and at least one per instance."""
    budget = value("ddb_partition_wru") * value("ddb_partition_utilization")
    return shard_count(2 * claim / budget, at_least=instances, warnings=warnings, name="due")


def shard_count(needed: float, *, at_least: int, warnings: list[QuotaWarning], name: str) -> int:
    """The next power of two >= ``needed`` (and >= 16, >= ``at_least``), capped at 4,096."""
    want = max(MIN_SHARDS, at_least, math.ceil(needed))
    shards = 1 << (want - 1).bit_length()
    if shards > MAX_SHARDS:
        warnings.append(
            QuotaWarning(
                f"{name}_shards", f"{name} index needs {want:,} shards, more than the {MAX_SHARDS:,} supported"
            )
        )
        return MAX_SHARDS
    return shards


def scheduling(load: Load, warnings: list[QuotaWarning]) -> Scheduling:
    """The plan's scheduling figures: the fleet, and the open index's shards."""
    fleet = plan_fleet(load, warnings)
    claim, shards, instances = fleet.claim_rate, fleet.due_shards, fleet.instances
    budget = value("ddb_partition_wru") * value("ddb_partition_utilization")
    # an entry put per claimed run and deleted per finished run; a claim window's runs share one (a marker)
    window = claim_runs_of(claim_window_for(load.burst_interval_s), load.burst_interval_s)
    open_writes = (claim + load.peak_runs_per_second) / window if load.open_index else 0.0
    open_shards = shard_count(open_writes / budget, at_least=1, warnings=warnings, name="open") if open_writes else 0
    due_per_shard = 2 * claim / shards
    open_per_shard = open_writes / open_shards if open_shards else 0.0
    owned = math.ceil(shards / instances)
    return Scheduling(
        burst_runs=load.burst_runs,
        lookahead_ms=fleet.lookahead_ms,
        claim_rate_needed=round(claim, 1),
        scheduler_instances=instances,
        scheduler_memory_mb=fleet.memory_mb,
        shards_per_instance=owned,
        claim_capacity=round(fleet_claim_rate(instances, shards, instance_claim_rate(owned, fleet.memory_mb)), 1),
        due_shards=shards,
        due_shard_wru_per_s=round(due_per_shard, 1),
        due_shard_utilization=round(due_per_shard / value("ddb_partition_wru"), 3),
        open_shards=open_shards,
        open_shard_wru_per_s=round(open_per_shard, 1),
        open_shard_utilization=round(open_per_shard / value("ddb_partition_wru"), 3),
    )
