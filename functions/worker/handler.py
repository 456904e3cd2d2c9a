"""Worker Lambda: the SQS event source of the dispatch queue delivers batches of run messages.

The whole batch goes through the async worker (``punctual.execution.sqs_events.LambdaWorker``):
every record is a coroutine on one event loop, leases and finishes are written in batches. A
record whose message must stay (retrying, held by another worker, or a failed batch step) is
reported as a batch item failure after its visibility was set, so SQS brings it back exactly when
it is due; the event source mapping must enable ``ReportBatchItemFailures``. The function timeout
must exceed the longest job ``timeout_s`` plus the lease margin (15 min at most: longer jobs need
``punctual worker`` on Fargate).
"""

from __future__ import annotations

from collections import Counter
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from punctual.clock import SystemClock
from punctual.config import Settings
from punctual.engines import open_engine
from punctual.execution.delivery import RUN_METRICS, ExecutionOptions, Outcome
from punctual.execution.sqs_events import LambdaWorker
from punctual.resources import DISPATCH_QUEUE
from punctual.runs.alerts import alerter_for
from punctual.runtime.powertools import PowertoolsMetrics

logger = Logger()
tracer = Tracer()
metrics = Metrics()
sink = PowertoolsMetrics(metrics)  # start lateness samples; @metrics.log_metrics flushes them


@cache
def _worker() -> LambdaWorker:
    """Engine, target policy and alerter, built once per execution environment (never at import)."""
    settings = Settings.from_env()
    clock = SystemClock()
    # The visibility the event source received the messages with: the deployed queue's (from the stack).
    visibility_s = settings.dispatch_visibility_s or DISPATCH_QUEUE.visibility_timeout_s
    options = ExecutionOptions(lease_margin_s=settings.lease_margin_s, visibility_s=visibility_s)
    alerter = alerter_for(settings.alert_topic_arn, lambda: boto3.client("sns"))
    # on AWS: public addresses only, unless configured
    engine = open_engine(settings, clock=clock)
    return LambdaWorker(engine, clock, settings.target_policy(), options, alerter, metrics=sink)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    sink.new_invocation()
    worker_id = f"lambda:{getattr(context, 'log_stream_name', None) or 'local'}"
    failures, settled = _worker().handle(event.get("Records") or [], worker_id)
    counts = Counter(s.value if isinstance(s, Outcome) else "error" for s in settled)
    for name, count in counts.items():
        metrics.add_metric(name=f"Delivery_{name}", unit=MetricUnit.Count, value=count)
    for outcome, metric in RUN_METRICS.items():
        if counts.get(outcome.value):
            metrics.add_metric(name=metric, unit=MetricUnit.Count, value=counts[outcome.value])
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failures]}
