"""Scheduler Lambda: invoked at the start of every minute by EventBridge as instance i of K; loops each second.

It ticks through the next minute's claim window until its successor (the next minute's invocation
of instance i) takes the shard leases over, or until second 40 of the next minute, whichever comes
first (``punctual.scheduling.invocation``). Its owner name carries its generation,
``scheduler-i@<minute>``: the successor takes the leases over at its first tick, and this one stops
claiming at its next refresh. If no successor came, it releases its leases when it stops, and the
other instances take the shards over at once.

The invocation fails (raises ``SchedulerFailing``, so the function's ``Errors`` metric counts it)
when ``PUNCTUAL_SCHEDULER_MAX_FAILED_TICKS`` ticks in a row achieved nothing, or when it ends (at
that deadline, or at the hand-over) without one tick that succeeded (``punctual.scheduling.health``).
A hand-over itself is a normal stop, never a failure. Before that, every tick reports its outcome as
metrics, which the stack's alarms watch.
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
from punctual.scheduling import invocation

logger = Logger()
tracer = Tracer()
metrics = Metrics()


class SchedulerEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")
    instance: int = Field(default=0, ge=0)
    instances: int = Field(default=1, ge=1, le=1024)
    time: str | None = None  # EventBridge's event time: the minute the event was scheduled for

    @model_validator(mode="after")
    def _index_in_fleet(self) -> SchedulerEvent:
        if self.instance >= self.instances:
            raise ValueError("instance must be < instances")
        invocation.generation(self.time, 0)  # raises ValueError for a time that is not one
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
    now = runtime.clock.now_ms()
    generation = invocation.generation(request.time, now)
    scheduler = runtime.scheduler(
        metrics=sink,
        instance=request.instance,
        instances=request.instances,
        # Instance i's owner of this generation: the next minute's invocation takes its leases over.
        owner=invocation.owner(request.instance, generation),
    )
    until = invocation.run_until_ms(now, context.get_remaining_time_in_millis(), generation)
    stats = scheduler.run(threading.Event(), until_ms=until, after_tick=sink.flush)
    logger.info("scheduler invocation done", extra={"instance": request.instance, "stats": stats})
    return {"instance": request.instance, "dispatched": stats.dispatched, "conflicts": stats.conflicts}
