"""DynamoDB capacity modes by arithmetic: on-demand against provisioned with auto scaling and burst credits.

The load is a burst: ``B`` runs every ``interval`` seconds (20,000 every 60 s for the mission), and
nothing in between. Each table and index takes a number of units per burst (the per-run units of
``punctual.capacity.counts`` on that table, times the burst) plus a steady trickle (shard polls,
lease renewals).

- **On-demand** bills every unit: units per month x the per-million price.
- **Provisioned** bills capacity per hour, used or not. A table provisioned at ``P`` units/s keeps
  up to ``ddb_burst_seconds`` (300 s) of unused capacity as burst credits and may spend them
  faster than ``P`` (best effort), but never faster than its partitions allow (1,000 write units/s
  each). So a burst every interval is sustainable when the credits refill between bursts, that is
  when ``P`` covers the average (``units per interval / interval``), and the bucket holds a whole
  burst (``300 x P >= units per burst``). The plan provisions the average over auto scaling's
  target utilization (70 %: auto scaling, which reads the consumed units per minute, then holds
  ``P`` there) and sets auto scaling's minimum to it, so a quiet hour cannot scale it down before
  the next burst. The partitions come from the table's warm throughput (pre-warmed to the peak,
  as on-demand needs too; a one-time charge), not from ``P``.
- **When the credits run out** (a longer burst than planned, credits spent by DynamoDB's own
  background work, which AWS reserves the right to do): writes above ``P`` are throttled, the SDK
  retries them with backoff, and the burst drains at ``P``: ``units per burst / P`` seconds
  (``drain_s_without_credits``). Runs start that much later, none is lost (a throttled claim or
  lease is retried; ``alarm_dynamodb_throttles`` fires), and auto scaling raises ``P`` over the
  next minutes if the load itself grew.

The plan recommends the cheaper mode for the load; ``--dynamodb on-demand|provisioned`` overrides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from punctual.capacity.constants import value
from punctual.capacity.cost_lines import MILLION, CostLine
from punctual.capacity.counts import PerRun
from punctual.capacity.extras import Extras
from punctual.capacity.figures import Scheduling
from punctual.capacity.load import SECONDS_PER_MONTH, CapacityMode, Load

AUTOSCALING_MAX_FACTOR = 4  # auto scaling may raise a table to 4x its planned capacity (growth)
DUE_ROW_BYTES = 250  # a due-index row: keys plus the projection a claim reads
PRELEASE_READS = 1.0  # a pre-leased run read once before its instant (its item under 4 KB, strongly consistent)


@dataclass(frozen=True, slots=True)
class TableLoad:
    """What one table or index takes: units per burst, and a steady rate between bursts."""

    name: str
    burst_writes: float
    burst_reads: float
    steady_writes: float = 0.0  # units/s, all the time
    steady_reads: float = 0.0


@dataclass(frozen=True, slots=True)
class Provisioned:
    """One table or index in provisioned mode, as the deploy line sets it."""

    name: str
    write_units: int  # provisioned WCU: auto scaling's minimum
    read_units: int
    max_write_units: int  # auto scaling's maximum
    max_read_units: int
    burst_writes: float  # units one burst takes
    drain_s_without_credits: float  # the burst at the provisioned rate, had the credits run out


@dataclass(frozen=True, slots=True)
class ModeOption:
    name: str  # on-demand | provisioned
    monthly_usd: float  # the DynamoDB requests or capacity (storage is the same either way)
    lines: list[CostLine]
    tables: list[Provisioned] = field(default_factory=list)
    note: str = ""


def table_loads(load: Load, s: Scheduling, counts: PerRun, extras: Extras, *, prelease: bool) -> list[TableLoad]:
    """Units per burst on each table and index, from the per-run units (and the retries' and waits').

    ``prelease``: the workers pre-lease (the Fargate tier), reading each run they hold once
    before its instant (``punctual.execution.batch.hold``: strongly consistent, 1 read unit).
    """
    b = load.burst_runs
    w = counts.writes
    rows = [
        # a job is two items: the claim rewrites its head (once per claim window); the worker reads its head and spec
        TableLoad("jobs", b * w.claim_jobs_per_run, b * counts.dynamodb_reads),
        # each due shard queried once a second (0.5 RRU at least), plus the rows claimed
        TableLoad("jobs.due", b * w.claim_due_per_run, b * 0.5 * DUE_ROW_BYTES / 4096, steady_reads=s.due_shards * 0.5),
        TableLoad("jobs.by_owner", 0.0, 0.0),  # written by the API only; claims leave it alone
        TableLoad("jobs.by_calendar", 0.0, 0.0),  # job writes that name a calendar (API only)
        TableLoad(
            "runs",
            b * (w.insert_runs + w.lease_per_run + w.finish_runs + 2 * w.marker_per_run + extras.runs_write_units),
            # pre-leased runs read before their instant; the reaper reads each claim window once
            b * (PRELEASE_READS if prelease else 0.0) + b * counts.reaper_reads,
        ),
    ]
    if load.open_index:
        rows.append(
            TableLoad(
                "runs.open",
                b * (w.insert_open_per_run + w.finish_open_per_run),
                0.0,
                steady_reads=s.open_shards * 0.5 / 60,
            )
        )
    # shard leases renewed every 3 s; the owners' GET /stats counters; the owners' rate records (waits)
    rows.append(
        TableLoad("leases", b * (w.finish_stats + extras.leases_write_units), 0.0, steady_writes=s.due_shards / 3)
    )
    rows.append(TableLoad("leases.outbox", 0.0, 0.0))  # pending notifications of jobs that notify (issue 33)
    return rows


def on_demand(load: Load, rows: list[TableLoad]) -> ModeOption:
    bursts = SECONDS_PER_MONTH / load.burst_interval_s
    writes = sum(r.burst_writes * bursts + r.steady_writes * SECONDS_PER_MONTH for r in rows)
    reads = sum(r.burst_reads * bursts + r.steady_reads * SECONDS_PER_MONTH for r in rows)
    lines = [
        CostLine(
            "DynamoDB", f"on-demand writes: {writes / MILLION:,.0f} M WRU", writes * value("ddb_wru_usd") / MILLION
        ),
        CostLine("DynamoDB", f"on-demand reads: {reads / MILLION:,.0f} M RRU", reads * value("ddb_rru_usd") / MILLION),
    ]
    return ModeOption("on-demand", round(sum(line.monthly_usd for line in lines), 2), lines)


def provisioned(load: Load, rows: list[TableLoad]) -> ModeOption:
    tables = [_provision(load, r) for r in rows]
    hours = value("month_hours")
    wcu, rcu = sum(t.write_units for t in tables), sum(t.read_units for t in tables)
    lines = [
        CostLine(
            "DynamoDB",
            f"provisioned {wcu:,} WCU ({len(tables)} tables and indexes, auto scaling at"
            f" {value('ddb_autoscaling_target'):.0%}, bursts on credits)",
            wcu * hours * value("ddb_wcu_hour_usd"),
        ),
        CostLine("DynamoDB", f"provisioned {rcu:,} RCU", rcu * hours * value("ddb_rcu_hour_usd")),
    ]
    worst = max(tables, key=lambda t: t.drain_s_without_credits)
    note = (
        f"burst credits are best effort: without them the {worst.name} burst ({worst.burst_writes:,.0f} units)"
        f" drains at {worst.write_units:,} WCU in {worst.drain_s_without_credits:,.0f} s"
    )
    return ModeOption("provisioned", round(sum(line.monthly_usd for line in lines), 2), lines, tables, note)


def _provision(load: Load, row: TableLoad) -> Provisioned:
    target = value("ddb_autoscaling_target")
    interval = load.burst_interval_s
    bucket = value("ddb_burst_seconds")

    def units(burst: float, steady: float) -> int:
        average = burst / interval + steady
        # the average over the target utilization; and a bucket (300 s of it) that holds a whole burst
        return max(1, math.ceil(average / target), math.ceil(burst / bucket))

    write_units, read_units = units(row.burst_writes, row.steady_writes), units(row.burst_reads, row.steady_reads)
    return Provisioned(
        name=row.name,
        write_units=write_units,
        read_units=read_units,
        max_write_units=write_units * AUTOSCALING_MAX_FACTOR,
        max_read_units=read_units * AUTOSCALING_MAX_FACTOR,
        burst_writes=round(row.burst_writes, 1),
        drain_s_without_credits=round(row.burst_writes / write_units, 1),
    )


def choose(load: Load, options: list[ModeOption]) -> tuple[ModeOption, str]:
    """The mode the plan deploys, and why (``Load.dynamodb`` forces one)."""
    by_name = {o.name: o for o in options}
    demand, prov = by_name["on-demand"], by_name["provisioned"]
    if load.dynamodb is not CapacityMode.AUTO:
        chosen = by_name[load.dynamodb.value]
        return chosen, f"{chosen.name}: as asked (--dynamodb)"
    if prov.monthly_usd < demand.monthly_usd:
        return prov, (
            f"provisioned: ${prov.monthly_usd:,.2f} a month against ${demand.monthly_usd:,.2f} on-demand: each table"
            f" and index provisioned for its average over the {load.burst_interval_s} s between bursts (at"
            f" {value('ddb_autoscaling_target'):.0%} utilization), the burst carried on burst credits; {prov.note}"
        )
    return demand, f"on-demand: ${demand.monthly_usd:,.2f} a month against ${prov.monthly_usd:,.2f} provisioned"
