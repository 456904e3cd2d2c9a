"""Reaper Lambda: an EventBridge schedule (every minute) runs a reaper pass; records from the
dispatch dead-letter queue (its SQS event source) mark their runs dead and alert the owners.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from punctual.config import Settings
from punctual.execution.sqs_events import KeepMessage, delivery_of
from punctual.reaping.dead_letters import DeadLetterResult, handle_dead_letter
from punctual.runtime.assembly import Runtime

logger = Logger()
tracer = Tracer()
metrics = Metrics()
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
SAFETY_MS = 10_000  # a sweep stops paging this long before the function's timeout


@cache
def _runtime() -> Runtime:
    """Engine and alerter, built once per execution environment (never at import)."""
    return Runtime.open(Settings.from_env())


def dead_letter_handler(record: SQSRecord) -> str:
    runtime = _runtime()
    result = handle_dead_letter(
        runtime.engine.store,
        runtime.alerter,
        delivery_of(record.raw_event),
        runtime.clock.now_ms(),
        queue=runtime.engine.queue,
    )
    metrics.add_metric(name=f"DeadLetter_{result.value}", unit=MetricUnit.Count, value=1)
    if result is DeadLetterResult.CONFLICT:
        raise KeepMessage("the run kept changing; the dead-letter message is kept for a later try")
    return result.value


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if event.get("Records"):  # the dead-letter queue's event source
        return dict(
            process_partial_response(
                event=event, record_handler=dead_letter_handler, processor=processor, context=context
            )
        )
    runtime = _runtime()  # the schedule
    # the dead-letter queue is this function's own event source (above): the scheduled pass leaves it alone
    clock = runtime.clock
    reaper = runtime.reaper(drain_dead_letters=False)
    # Page until caught up, or until shortly before the timeout (the next minute's sweep goes on).
    stats = reaper.tick(until_ms=clock.now_ms() + context.get_remaining_time_in_millis() - SAFETY_MS)
    for name in ("redispatched", "requeued", "dead", "cancelled", "dead_letters", "alerts", "conflicts", "errors"):
        metrics.add_metric(name=f"Reaper_{name}", unit=MetricUnit.Count, value=getattr(stats, name))
    logger.info("reaper pass done", extra={"stats": stats})
    return {"examined": stats.examined, "redispatched": stats.redispatched, "dead": stats.dead}
