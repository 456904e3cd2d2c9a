"""API Lambda: Powertools logging, tracing and metrics around ``punctual.api.app.handle``.

The settings and the engine are built on the first request and cached for the life of the
execution environment; importing this module does no I/O.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from punctual.api.app import handle
from punctual.api.caller import Services
from punctual.config import EngineKind, Settings
from punctual.runtime.assembly import Runtime

logger = Logger(service="punctual-api")
tracer = Tracer(service="punctual-api")
metrics = Metrics(namespace="Punctual", service="punctual-api")


@cache
def services() -> Services:
    """Settings from the environment the CDK app sets; always the aws engine in Lambda."""
    return Runtime.open(Settings.from_env(engine=EngineKind.AWS)).services()


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    response = handle(event, context, services())
    # Server errors are what an alarm should watch; client errors are the callers' business.
    metrics.add_metric(name="ApiRequests", unit=MetricUnit.Count, value=1)
    metrics.add_metric(name="ApiServerErrors", unit=MetricUnit.Count, value=int(response["statusCode"] >= 500))
    return response
