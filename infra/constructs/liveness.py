"""Alarms for the failures that make no noise: runs stop, and no error count rises.

A scheduler that catches its failed ticks, a fleet that owns fewer shards than exist, a reaper
nobody invokes and workers that delete nothing all look healthy to error-rate alarms. Each alarm
here watches a signal that a healthy system keeps emitting. Where silence means the emitter is
dead, the alarm breaches on missing data.

- ``SchedulerTicksFailing``: some scheduler had ``SCHEDULER_FAILED_TICKS_ALARM`` failed ticks in a
  row (``SchedulerFailedTicksInARow``, reported after every tick, 0 after a good one). It counts a
  tick in which only some shards failed, which never makes the invocation fail. Missing data breaches.
- ``ClaimLagHigh``: a due job waited longer than ``alarm_claim_lag_ms`` for its claim (``ClaimLagMs``:
  now minus the oldest due ``next_run_at`` of each owned shard, reported by every tick that read a
  shard). This is the lateness a job has before it becomes a run, which ``DispatchLatenessMs`` cannot
  see. Missing data breaches: no tick read anything.
- ``ShardsUnowned``: the fleet owns fewer shards than ``shards``. Each scheduler reports
  ``ShardsOwned`` once per 10 s window (``punctual.scheduling.scheduler.SHARDS_OWNED_EVERY_MS``),
  so a minute's sum over the fleet, divided by the windows in a minute, is the fleet's total
  whatever the tick rate. A scheduler reports the shards it held as the window began, so the Lambda's
  minute hand-over counts each shard once (by the old invocation); only a successor that takes over
  in the lease refresh (3 s) before a window begins is counted in it with its predecessor (a sixth
  of an instance's shards high for that minute, never low). Missing data breaches.
- ``ReaperInvocationsMissing``: the reaper was not invoked for ``REAPER_INVOCATION_ALARM_MINUTES``
  minutes (its rule fires every minute). Missing data breaches: a Lambda never invoked emits nothing.
- ``WorkersStalled``: for ``WORKERS_STALLED_ALARM_MINUTES`` minutes the dispatch queue never had
  fewer than 1 ready message while no worker deleted any: nothing finishes runs (event source
  disabled, workers failing before they finish, or every worker busy for the whole time). A quiet
  queue emits no data, and that is fine.
"""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs

from infra import constants
from infra.config import InfraConfig
from infra.constructs.alarm_spec import ONE_MINUTE, AlarmSpec, punctual_metric
from punctual.scheduling.scheduler import SHARDS_OWNED_EVERY_MS

# A scheduler this many ticks in a row in failure is failing, not blipping (one tick a second).
SCHEDULER_FAILED_TICKS_ALARM = 10
SCHEDULER_FAILURE_ALARM_MINUTES = 3
CLAIM_LAG_ALARM_MINUTES = 3
SHARDS_UNOWNED_ALARM_MINUTES = 3
REAPER_INVOCATION_ALARM_MINUTES = 3
WORKERS_STALLED_ALARM_MINUTES = 3
_BREACHING = cw.TreatMissingData.BREACHING


def alarm_specs(config: InfraConfig, *, reaper: lambda_.IFunction, dispatch_queue: sqs.IQueue) -> list[AlarmSpec]:
    """The alarms of this module, for ``Observability`` to build and notify like the others."""
    failed_ticks = min(SCHEDULER_FAILED_TICKS_ALARM, config.scheduler_max_failed_ticks)
    return [
        AlarmSpec(
            "SchedulerTicksFailing",
            f"A scheduler failed {failed_ticks} ticks in a row (or no scheduler reports at all): claims fail "
            "(DynamoDB AccessDenied or throttling, a queue policy, a network fault) and runs wait",
            punctual_metric(constants.SCHEDULER_FAILED_TICKS_IN_A_ROW, "Maximum", labelled=False),
            failed_ticks,
            SCHEDULER_FAILURE_ALARM_MINUTES,
            comparison=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            missing=_BREACHING,
        ),
        AlarmSpec(
            "ClaimLagHigh",
            f"A due job waited more than {config.alarm_claim_lag_ms} ms for its claim (or no scheduler "
            "read a shard): the scheduler fleet is behind, failing or stopped",
            punctual_metric(constants.CLAIM_LAG_MS, "Maximum", labelled=False),
            config.alarm_claim_lag_ms,
            CLAIM_LAG_ALARM_MINUTES,
            missing=_BREACHING,
        ),
        AlarmSpec(
            "ShardsUnowned",
            f"The scheduler fleet owns fewer than {config.shards} shards (or reports none): the jobs of an "
            "unowned shard are not claimed",
            shards_owned(config.shards),
            config.shards,
            SHARDS_UNOWNED_ALARM_MINUTES,
            comparison=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing=_BREACHING,
        ),
        AlarmSpec(
            "ReaperInvocationsMissing",
            f"The reaper was not invoked for {REAPER_INVOCATION_ALARM_MINUTES} minutes: nobody requeues "
            "stuck runs or drains the dead-letter queue (EventBridge rule disabled, function throttled)",
            reaper.metric_invocations(statistic="Sum", period=ONE_MINUTE),
            1,
            REAPER_INVOCATION_ALARM_MINUTES,
            comparison=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing=_BREACHING,
        ),
        AlarmSpec(
            "WorkersStalled",
            f"Ready dispatch messages for {WORKERS_STALLED_ALARM_MINUTES} minutes and none deleted: no worker "
            "finishes runs (event source disabled, workers crashing, or every worker busy throughout)",
            workers_stalled(dispatch_queue),
            1,
            WORKERS_STALLED_ALARM_MINUTES,
            comparison=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        ),
    ]


def shards_owned(shards: int) -> cw.MathExpression:
    """The shards the whole fleet owns, per minute (it should be ``shards``; see the module docstring)."""
    windows_per_minute = 60_000 // SHARDS_OWNED_EVERY_MS
    return cw.MathExpression(
        expression=f"owned / {windows_per_minute}",
        using_metrics={"owned": punctual_metric(constants.SHARDS_OWNED, "Sum", labelled=False)},
        label=f"{constants.SHARDS_OWNED} (fleet total of {shards})",
        period=ONE_MINUTE,
    )


def workers_stalled(queue: sqs.IQueue) -> cw.MathExpression:
    """1 in a minute in which the queue always had a ready message and no worker deleted one, else 0."""
    return cw.MathExpression(
        expression="IF(visible > 0 AND FILL(deleted, 0) == 0, 1, 0)",
        using_metrics={
            # Minimum: ready messages the whole minute through, not one burst that was drained at once
            "visible": queue.metric_approximate_number_of_messages_visible(statistic="Minimum", period=ONE_MINUTE),
            "deleted": queue.metric_number_of_messages_deleted(statistic="Sum", period=ONE_MINUTE),
        },
        label="Dispatch queue: ready messages and no deletes",
        period=ONE_MINUTE,
    )


def health_graphs(queue: sqs.IQueue) -> list[tuple[str, list[cw.IMetric]]]:
    """(title, metrics) of the dashboard's row for these alarms' inputs (shards owned is on the claims graph)."""
    return [
        (
            "Scheduler: failed ticks",
            [
                punctual_metric(constants.SCHEDULER_TICK_FAILURES, "Sum"),
                punctual_metric(constants.SCHEDULER_FAILED_TICKS_IN_A_ROW, "Maximum"),
            ],
        ),
        ("Scheduler: claim lag (ms)", [punctual_metric(constants.CLAIM_LAG_MS, "Maximum")]),
        (
            "Dispatch queue: ready (minimum) and deleted",
            [
                queue.metric_approximate_number_of_messages_visible(
                    statistic="Minimum", period=ONE_MINUTE, label="Ready (minimum)"
                ),
                queue.metric_number_of_messages_deleted(statistic="Sum", period=ONE_MINUTE, label="Deleted"),
            ],
        ),
    ]
