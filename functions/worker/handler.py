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

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from punctual.config import Settings
from punctual.execution.options import Outcome
from punctual.execution.sqs_events import LambdaWorker
from punctual.runtime.assembly import Runtime
from punctual.runtime.powertools import PowertoolsMetrics
from punctual.runtime.process import collect_rarely

logger = Logger()
tracer = Tracer()
metrics = Metrics()
sink = PowertoolsMetrics(metrics)  # start lateness samples; @metrics.log_metrics flushes them


@cache
def _worker() -> LambdaWorker:
    """Built once per execution environment (never at import): engine, target policy (on AWS: public
    addresses only, unless configured), the deployed queue's visibility and the SNS alerter."""
    collect_rarely()  # the environment's imports are done: see punctual.runtime.process
    return Runtime.open(Settings.from_env()).lambda_worker(metrics=sink)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    sink.new_invocation()
    worker_id = f"lambda:{getattr(context, 'log_stream_name', None) or 'local'}"
    failures, settled = _worker().handle(event.get("Records") or [], worker_id)
    counts = Counter(s.value if isinstance(s, Outcome) else "error" for s in settled)
    # the runs' outcomes (RunsSucceeded, ...) are counted by the worker itself, through ``sink``
    for name, count in counts.items():
        metrics.add_metric(name=f"Delivery_{name}", unit=MetricUnit.Count, value=count)
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failures]}
