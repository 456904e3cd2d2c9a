"""Scheduler Lambda: invoked every minute by EventBridge as instance i of K; loops each second.

It ticks until 5 s before its own timeout, so consecutive invocations overlap and the next one
takes the shard leases over without a gap (``punctual.scheduling.invocation``). Every invocation
of instance i uses the owner name ``scheduler-i`` and keeps its shard leases when it returns: the
next invocation renews them at once; if none comes, they expire and the other instances take the
shards over.

The invocation fails (raises ``SchedulerFailing``, so the function's ``Errors`` metric counts it)
when ``PUNCTUAL_SCHEDULER_MAX_FAILED_TICKS`` ticks in a row achieved nothing, or when it reaches its
deadline without one tick that succeeded (``punctual.scheduling.health``). Before that, every tick
reports its outcome as metrics, which the stack's alarms watch.
"""

from __future__ import annotations

import threading
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from punctual.config import Settings
from punctual.errors import InvalidInput
from punctual.runtime.assembly import Runtime
from punctual.runtime.powertools import PowertoolsMetrics
from punctual.runtime.process import collect_rarely
from punctual.scheduling.invocation import run_until_ms

logger = Logger()
tracer = Tracer()
metrics = Metrics()


class SchedulerEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")
    instance: int = Field(default=0, ge=0)
    instances: int = Field(default=1, ge=1, le=1024)

    @model_validator(mode="after")
    def _index_in_fleet(self) -> SchedulerEvent:
        if self.instance >= self.instances:
            raise ValueError("instance must be < instances")
        return self


@cache
def _runtime() -> Runtime:
    collect_rarely()  # the environment's imports are done: see punctual.runtime.process
    return Runtime.open(Settings.from_env())


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        request = SchedulerEvent.model_validate(event or {})
    except ValidationError as exc:
        raise InvalidInput(f"invalid scheduler event: {exc.errors(include_url=False)}") from exc
    runtime = _runtime()
    sink = PowertoolsMetrics(metrics)
    scheduler = runtime.scheduler(
        metrics=sink,
        instance=request.instance,
        instances=request.instances,
        # The same owner in every invocation of instance i: the next minute's invocation renews
        # this one's leases at once (they are kept, not released), so shards stay balanced.
        owner=f"scheduler-{request.instance}",
    )
    until = run_until_ms(runtime.clock.now_ms(), context.get_remaining_time_in_millis())
    stats = scheduler.run(threading.Event(), until_ms=until, after_tick=sink.flush, release_on_stop=False)
    logger.info("scheduler invocation done", extra={"instance": request.instance, "stats": stats})
    return {"instance": request.instance, "dispatched": stats.dispatched, "conflicts": stats.conflicts}
