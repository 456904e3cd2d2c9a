"""Worker Lambda: the SQS event source of the dispatch queue delivers batches of run messages.

Each record is one run for ``punctual.execution.delivery.process_delivery`` (through
``punctual.execution.sqs_events.LambdaWorker``). Records of a batch run concurrently (a batch holds runs due
at the same second; executing them one after another would start the last one late). A record
whose message must stay (retrying, held by another worker) is reported as a batch item failure
after its visibility was set, so SQS brings it back exactly when it is due; the event source
mapping must enable ``ReportBatchItemFailures``. The function timeout must exceed the longest job
``timeout_s`` plus the lease margin (15 min at most: longer jobs need ``punctual worker`` on Fargate).
"""

from __future__ import annotations

import asyncio
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import AsyncBatchProcessor, EventType, async_process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from punctual.clock import SystemClock
from punctual.config import Settings
from punctual.engines import open_engine
from punctual.execution.delivery import RUN_METRICS, ExecutionOptions, Outcome
from punctual.execution.sqs_events import KeepMessage, LambdaWorker
from punctual.execution.targets import Targets
from punctual.resources import DISPATCH_QUEUE
from punctual.runs.alerts import alerter_for
from punctual.runtime.powertools import PowertoolsMetrics

logger = Logger()
tracer = Tracer()
metrics = Metrics()
# raise_on_entire_batch_failure=False: a batch whose every run is retrying or held is normal, not an error
processor = AsyncBatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
sink = PowertoolsMetrics(metrics)  # start lateness samples; @metrics.log_metrics flushes them


@cache
def _worker() -> LambdaWorker:
    """Engine, targets and alerter, built once per execution environment (never at import)."""
    settings = Settings.from_env()
    clock = SystemClock()
    options = ExecutionOptions(lease_margin_s=settings.lease_margin_s, visibility_s=DISPATCH_QUEUE.visibility_timeout_s)
    alerter = alerter_for(settings.alert_topic_arn, lambda: boto3.client("sns"))
    targets = Targets(settings.target_policy())  # on AWS: public addresses only, unless configured
    targets.warm_up()
    return LambdaWorker(open_engine(settings, clock=clock), targets, clock, options, alerter, metrics=sink)


async def record_handler(record: SQSRecord, lambda_context: LambdaContext | None = None) -> str:
    worker_id = f"lambda:{getattr(lambda_context, 'log_stream_name', None) or 'local'}"
    try:
        outcome = await asyncio.to_thread(_worker().process, record.raw_event, worker_id)
    except KeepMessage as kept:
        _count(Outcome(kept.details["outcome"]))
        raise
    _count(outcome)
    return outcome.value


def _count(outcome: Outcome) -> None:
    metrics.add_metric(name=f"Delivery_{outcome.value}", unit=MetricUnit.Count, value=1)
    if outcome in RUN_METRICS:
        metrics.add_metric(name=RUN_METRICS[outcome], unit=MetricUnit.Count, value=1)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    sink.new_invocation()
    return dict(
        async_process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
    )
