"""Capacity and cost: a target load in, AWS settings, quota raises, lateness and a monthly cost out.

Owns the sourced constants table (``constants``; its AWS quotas and prices in ``aws_constants``,
the record type in ``sourced``), the per-run request counts the tests measure (``counts``), the
model (``plan``; workers in ``workers``, per-owner ceilings in ``owners``), its prices (``cost``),
the burst simulation (``simulate``, fed from the plan or from a synthesized CDK template through
the same ``synth.Deployment``) and their text rendering (``render``). Pure arithmetic: no
AWS calls. ``punctual capacity`` and ``punctual capacity simulate`` print it.
"""

from __future__ import annotations

from typing import Any

from punctual.capacity.cost import CostTable, monthly_cost
from punctual.capacity.figures import CapacityPlan
from punctual.capacity.load import Load, WorkerKind
from punctual.capacity.plan import deploy_command, plan_capacity

__all__ = [
    "CapacityPlan",
    "CostTable",
    "Load",
    "WorkerKind",
    "deploy_command",
    "monthly_cost",
    "plan_capacity",
    "report",
]


def report(load: Load) -> dict[str, Any]:
    """Everything ``punctual capacity --json`` prints: the plan, its cost and the deploy line."""
    plan = plan_capacity(load)
    cost = monthly_cost(load, plan)
    return {**plan.to_dict(), "cost": cost.to_dict(), "deploy_command": deploy_command(plan.context)}
