"""Powertools Metrics behind the ``punctual.metrics.Metrics`` port (Lambda only)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit


class PowertoolsMetrics:
    """Counts and distributions as CloudWatch EMF metrics.

    Distributions are sampled to ``max_samples`` values per flush: EMF carries at most 100 values
    per metric in one log event, and a top-of-minute burst observes tens of thousands.
    """

    def __init__(self, metrics: Any, max_samples: int = 100) -> None:
        self.metrics = metrics
        self.max_samples = max_samples
        self._seen: dict[str, int] = {}

    def count(self, name: str, value: float = 1) -> None:
        if value:
            self.metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)

    def observe(self, name: str, value: float) -> None:
        seen = self._seen.get(name, 0)
        self._seen[name] = seen + 1
        if seen < self.max_samples:
            self.metrics.add_metric(name=name, unit=MetricUnit.Milliseconds, value=value)

    def gauge(self, name: str, value: float) -> None:
        self.metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)

    def new_invocation(self) -> None:
        """Start a new sample budget without flushing (a Lambda decorator flushes at the end)."""
        self._seen.clear()

    def flush(self) -> None:
        self.metrics.flush_metrics(raise_on_empty_metrics=False)
        self._seen.clear()
