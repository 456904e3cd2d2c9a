"""One line of a monthly cost, and the units the cost arithmetic shares."""

from __future__ import annotations

from dataclasses import dataclass

MILLION = 1_000_000
GIB = 1024**3


@dataclass(frozen=True, slots=True)
class CostLine:
    service: str
    item: str
    monthly_usd: float

    def rounded(self) -> CostLine:
        return CostLine(self.service, self.item, round(self.monthly_usd, 2))
