"""Owner alerts, as every engine keeps them (``punctual.runs.alerts``): a part of :class:`~punctual.port.Store`."""

from __future__ import annotations

from abc import ABC, abstractmethod

from punctual.port.records import Alert


class AlertStore(ABC):
    @abstractmethod
    def record_alert(self, alert: Alert) -> bool:
        """Record an owner alert once per run (True if new, False if this run already alerted)."""

    @abstractmethod
    def list_alerts(self, owner: str, limit: int = 50) -> list[Alert]:
        """The owner's alerts, newest first."""
