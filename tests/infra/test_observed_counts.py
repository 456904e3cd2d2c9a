"""What AWS prices by the piece, counted in the synthesized stacks, is what ``punctual capacity`` prices.

CloudWatch bills a standard alarm per metric it reads (a metric-math alarm reads several) and KMS a
month per customer-managed key. ``punctual.capacity.observed`` holds both counts per deployment
shape (open index or not, Fargate workers or not); each stack that must hold is counted here.
"""

from __future__ import annotations

import pytest

from punctual.capacity.observed import alarm_metrics, kms_keys
from tests.infra.synth import Synth

pytestmark = pytest.mark.infra


def _alarm_metrics(synth: Synth) -> int:
    alarms = synth.properties("AWS::CloudWatch::Alarm")
    return sum(sum("MetricStat" in q for q in a["Metrics"]) if "Metrics" in a else 1 for a in alarms)


def _shape(synth: Synth) -> tuple[bool, bool]:
    open_index = any(
        index["IndexName"] == "open"
        for table in synth.properties("AWS::DynamoDB::Table")
        for index in table.get("GlobalSecondaryIndexes", [])
    )
    return open_index, bool(synth.resources("AWS::ECS::Service"))


@pytest.mark.parametrize("stack", ["default", "default_closed", "plan", "plan_closed", "options"])
def test_the_model_prices_the_alarms_and_keys_each_stack_has(stack: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(f"{stack}_synth")
    open_index, fargate = _shape(synth)
    assert _alarm_metrics(synth) == alarm_metrics(open_index=open_index, fargate=fargate), (open_index, fargate)
    assert len(synth.resources("AWS::KMS::Key")) == kms_keys()
