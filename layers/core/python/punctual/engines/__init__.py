"""Engines: implementations of the port (``punctual.port``), chosen by configuration.

``aws`` (DynamoDB + SQS) and ``embedded`` (one SQLite file). May import: the kernels only; the
rules they apply come from ``punctual.rules``, and nothing above the port imports an engine
except through :func:`open_engine` (the Lambda SQS adapter reads the aws message codec).
"""

from __future__ import annotations

from typing import Any

from punctual.clock import Clock, SystemClock
from punctual.config import EngineKind, Settings
from punctual.port import Engine


def open_engine(settings: Settings, *, clock: Clock | None = None, **options: Any) -> Engine:
    """Open the engine ``settings.engine`` names. ``options`` go to the engine (e.g. a boto3 session)."""
    clock = clock or SystemClock()
    if settings.engine is EngineKind.EMBEDDED:
        from punctual.engines.embedded import EmbeddedEngine

        return EmbeddedEngine.from_settings(settings, clock=clock, **options)
    from punctual.engines.aws import AwsEngine

    options.setdefault("serialize", settings.aws_serialize)
    return AwsEngine.from_settings(settings, clock=clock, **options)
