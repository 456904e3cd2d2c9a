"""``punctual capacity`` for humans: the report as readable sections."""

from __future__ import annotations

from typing import Any


def render(report: dict[str, Any]) -> str:
    """The text form of :func:`punctual.capacity.report`'s result."""
    load, s, w, st, late = (report[k] for k in ("load", "scheduling", "workers", "storage", "lateness"))
    cost, per_run = report["cost"], report["per_run"]
    out = [
        f"Capacity for {load['jobs']:,} jobs, {load['peak_runs_per_second']:,} runs/s for {load['burst_seconds']} s"
        f" every {load['burst_interval_s']} s ({report['runs_per_month']:,} runs a month), {load['region']}",
        "",
        "Scheduling",
        f"  lookahead {s['lookahead_ms']:,} ms: claim {s['claim_rate_needed']:,.0f} runs/s"
        f" with {s['scheduler_instances']} scheduler instance{'s' if s['scheduler_instances'] > 1 else ''},"
        f" at most {s['shards_per_instance']} due shards each"
        f" ({s['claim_capacity']:,.0f} runs/s)",
        f"  due shards {s['due_shards']}: {s['due_shard_wru_per_s']:,} WRU/s each at the peak"
        f" ({s['due_shard_utilization']:.0%} of a partition's 1,000)",
        (
            f"  open shards {s['open_shards']}: {s['open_shard_wru_per_s']:,} WRU/s each"
            f" ({s['open_shard_utilization']:.0%} of a partition)"
            if s["open_shards"]
            else "  open index dropped (-c open_index=false)"
        ),
        "",
        f"Per run: {per_run['write_units_total']} write units {per_run['write_units']},"
        f" {per_run['dynamodb_reads']:g} read, {per_run['sqs_requests']} SQS requests"
        + ("" if per_run["stats_counters"] else " (GET /stats run counters off: -c stats_counters=false)"),
        "",
        "DynamoDB at the peak        WRU/s      RRU/s   pre-warm writes/reads   quota to request",
    ]
    for t in report["tables"]:
        warm = f"{t['warm_writes']:,}/{t['warm_reads']:,}" if t["warm_writes"] or t["warm_reads"] else "-"
        quota = (
            f"{max(t['quota_wru_needed'], t['quota_rru_needed']):,}"
            if t["quota_wru_needed"] or t["quota_rru_needed"]
            else "-"
        )
        out.append(
            f"  {t['name']:<22} {t['peak_wru_per_s']:>10,.0f} {t['peak_rru_per_s']:>10,.0f}   {warm:>21}   {quota:>16}"
        )
    out += [
        "",
        f"SQS: {w['in_flight_runs']:,} messages in flight at the peak (limit {w['sqs_in_flight_limit']:,})",
        "",
        "Workers",
    ]
    if w["kind"] == "fargate":
        out.append(f"  Fargate: {w['fargate_tasks']} tasks x {w['fargate_in_flight_per_task']} runs in flight each")
    else:
        out.append(
            f"  Lambda, batch {w['batch_size']}, {w['invocation_s']} s per invocation:"
            f" {w['concurrency']:,} concurrent at the peak, {w['mode']} mode"
        )
        if w["mode"] == "provisioned":
            out.append(
                f"  provisioned pollers: minimum {w['min_pollers']}, maximum {w['max_pollers']}"
                f" (up to {w['max_pollers'] * 10:,} invocations; the reservation caps them at {w['max_concurrency']:,})"
            )
        out.append(
            f"  reserved concurrency {w['reserved_concurrency']:,};"
            f" account concurrency quota {w['account_concurrency_needed']:,}"
        )
    out += [
        "",
        f"Per-owner ceilings (the busiest owner: {report['busiest_owner_runs_per_second']:,} runs/s at the peak)",
    ]
    out += [
        f"  {c['name']:<22} {c['runs_per_second']:>10,g} runs/s  {c['applies_to']}" for c in report["owner_ceilings"]
    ]
    out += [
        "",
        f"Expected start lateness (burst model; target p99 {late['target_ms']:,} ms"
        f" {'met' if late['met'] else 'NOT met'})",
        f"  first burst (cold): {_pct(late['first_burst'])}",
        f"  steady (every minute): {_pct(late['steady'])}",
        "",
        f"Storage: jobs {st['jobs_gb']:,} GB, {st['runs_retained']:,} runs kept {load['retention_days']} days"
        f" = {st['runs_gb']:,} GB"
        + (
            f"; reaper sweep {st['sweep_pages']} pages a minute, a full sweep every {st['sweep_period_hours']:g} h"
            if st["sweep_pages"]
            else ""
        ),
        "",
        f"Monthly cost ({cost['region_note']})",
    ]
    for line in cost["lines"]:
        flag = "" if line["verified"] else "   (not in total)"
        out.append(f"  {line['service']:<12} {line['item']:<66} ${line['monthly_usd']:>12,.2f}{flag}")
    ebs = cost["eventbridge_scheduler"]
    out += [
        f"  {'total':<79} ${cost['monthly_usd']:>12,.2f}",
        f"  per million runs: ${cost['per_million_runs_usd']:,.3f}",
        "",
        f"EventBridge Scheduler, same load: ${ebs['monthly_usd']:,.2f}/month (${ebs['per_million_runs_usd']:,.3f} per"
        f" million runs, incl. a Lambda per run to call HTTP targets); {ebs['precision_s']} s precision;"
        f" a burst drains in {ebs['burst_drain_s_at_default_quota']:,} s at its default 1,000 invocations/s;"
        f" schedules within the 10 M default quota: {'yes' if ebs['schedules_quota_ok'] else 'NO'}; no run history",
        "",
    ]
    if report["warnings"]:
        out.append("Warnings (quota raises and limits)")
        out += [f"  [{x['code']}] {x['message']}" for x in report["warnings"]]
        out.append("")
    out += ["Deploy", f"  {report['deploy_command']}"]
    return "\n".join(out)


def _pct(values: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:,.0f} ms" for k, v in values.items()) or "no run started"
