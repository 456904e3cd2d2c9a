"""Engines: implementations of the port (``punctual.port``), chosen by configuration."""

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

    return AwsEngine.from_settings(settings, clock=clock, **options)
