"""What one CloudWatch alarm watches, and the metrics Punctual itself emits (shared by the alarm modules).

Punctual's own metrics come from Powertools (EMF) in namespace ``Punctual`` with the one dimension
``service=punctual`` (``infra.constants``). An alarm must name exactly that namespace and that
dimension set, or it watches a metric nobody emits.
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw

from infra import constants

ONE_MINUTE = cdk.Duration.minutes(1)


@dataclass(frozen=True)
class AlarmSpec:
    construct_id: str
    description: str
    metric: cw.IMetric
    threshold: float
    evaluation_periods: int = 1
    comparison: cw.ComparisonOperator = cw.ComparisonOperator.GREATER_THAN_THRESHOLD
    missing: cw.TreatMissingData = cw.TreatMissingData.NOT_BREACHING


def punctual_metric(name: str, statistic: str, *, labelled: bool = True) -> cw.Metric:
    """A Powertools metric of Punctual; a label (graphs only) would turn an alarm into metric math."""
    return cw.Metric(
        namespace=constants.METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map=constants.METRIC_DIMENSIONS,
        statistic=statistic,
        period=ONE_MINUTE,
        label=f"{name} {statistic}" if labelled else None,
    )
