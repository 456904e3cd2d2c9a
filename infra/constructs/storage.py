"""DynamoDB tables, built from ``punctual.resources.TABLES`` (the one source of truth).

Every table: on-demand billing, or with ``dynamodb_billing=provisioned`` (``punctual capacity``
recommends it when it costs less: docs/capacity.md) provisioned capacity with auto scaling on
each table and index: its minimum the ``provisioned_write_units`` / ``provisioned_read_units``
given (1 for one not listed), its maximum 4x that, at 70 % target utilization; the top-of-minute
burst runs on burst credits above it, within the partitions the warm throughput pre-warms. Then
point-in-time recovery, encryption with the AWS-managed
KMS key (no key policy to keep, no per-request KMS cost), TTL on the definition's attribute,
deletion protection and RETAIN from the context. With ``warm_throughput`` (billed: off by default),
each table and index listed in ``warm_write_units`` is pre-warmed to that many writes per second
and each one in ``warm_read_units`` to that many reads: a new on-demand table or index starts at
~4,000 writes and ~12,000 reads per second, and an index that cannot absorb its writes throttles
the writes to its base table. Physical names are left to CloudFormation
(replacements never collide) and reach the functions through PUNCTUAL_*_TABLE variables.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra import constants
from infra.config import InfraConfig
from punctual import resources

_ATTRIBUTE_TYPES = {"S": dynamodb.AttributeType.STRING, "N": dynamodb.AttributeType.NUMBER}
_PROJECTIONS = {
    "KEYS_ONLY": dynamodb.ProjectionType.KEYS_ONLY,
    "INCLUDE": dynamodb.ProjectionType.INCLUDE,
    "ALL": dynamodb.ProjectionType.ALL,
}


class Storage(Construct):
    """The jobs, runs and leases tables, keyed by their logical name in ``tables``."""

    def __init__(self, scope: Construct, construct_id: str, *, config: InfraConfig) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        definitions = resources.tables(open_index=config.open_index)
        self.tables: dict[str, dynamodb.Table] = {d.logical_name: self._build_table(d) for d in definitions}

    @property
    def jobs(self) -> dynamodb.Table:
        return self.tables[resources.JOBS.logical_name]

    @property
    def runs(self) -> dynamodb.Table:
        return self.tables[resources.RUNS.logical_name]

    @property
    def leases(self) -> dynamodb.Table:
        return self.tables[resources.LEASES.logical_name]

    def _build_table(self, definition: resources.TableDef) -> dynamodb.Table:
        name = definition.logical_name
        table = dynamodb.Table(
            self,
            name.capitalize(),
            partition_key=_attribute(definition.partition),
            sort_key=_attribute(definition.sort) if definition.sort else None,
            billing_mode=dynamodb.BillingMode.PROVISIONED
            if self._provisioned
            else dynamodb.BillingMode.PAY_PER_REQUEST,
            **self._capacity(name),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=definition.ttl_attribute,
            deletion_protection=self._config.deletion_protection,
            removal_policy=cdk.RemovalPolicy.RETAIN if self._config.retain_data else cdk.RemovalPolicy.DESTROY,
            warm_throughput=self._warm(name),
        )
        for index in definition.indexes:
            table.add_global_secondary_index(
                **_index_props(index),
                **self._capacity(f"{name}.{index.name}"),
                warm_throughput=self._warm(f"{name}.{index.name}"),
            )
        if self._provisioned:
            self._autoscale(table, name, [index.name for index in definition.indexes])
        return table

    @property
    def _provisioned(self) -> bool:
        return self._config.dynamodb_billing == "provisioned"

    def _units(self, name: str) -> tuple[int, int]:
        """(read, write) capacity units of a table or ``table.index`` in provisioned mode."""
        config = self._config
        return config.provisioned_read_units.get(name, 1), config.provisioned_write_units.get(name, 1)

    def _capacity(self, name: str) -> dict[str, Any]:
        if not self._provisioned:
            return {}
        read, write = self._units(name)
        return {"read_capacity": read, "write_capacity": write}

    def _autoscale(self, table: dynamodb.Table, name: str, indexes: list[str]) -> None:
        """Auto scaling on the table and each index: at least the planned units (a quiet hour must not
        scale them below the next burst's need), at most AUTOSCALING_MAX_FACTOR x, at the target utilization."""
        factor, target = constants.AUTOSCALING_MAX_FACTOR, constants.AUTOSCALING_TARGET_PERCENT
        read, write = self._units(name)
        table.auto_scale_read_capacity(min_capacity=read, max_capacity=read * factor).scale_on_utilization(
            target_utilization_percent=target
        )
        table.auto_scale_write_capacity(min_capacity=write, max_capacity=write * factor).scale_on_utilization(
            target_utilization_percent=target
        )
        for index in indexes:
            read, write = self._units(f"{name}.{index}")
            table.auto_scale_global_secondary_index_read_capacity(
                index, min_capacity=read, max_capacity=read * factor
            ).scale_on_utilization(target_utilization_percent=target)
            table.auto_scale_global_secondary_index_write_capacity(
                index, min_capacity=write, max_capacity=write * factor
            ).scale_on_utilization(target_utilization_percent=target)

    def _warm(self, name: str) -> dynamodb.WarmThroughput | None:
        if not self._config.warm_throughput:
            return None
        writes, reads = self._config.warm_write_units.get(name), self._config.warm_read_units.get(name)
        if not (writes or reads):
            return None
        return dynamodb.WarmThroughput(write_units_per_second=writes, read_units_per_second=reads)


def _attribute(key: resources.KeyAttr) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=key.name, type=_ATTRIBUTE_TYPES[key.type])


def _index_props(index: resources.IndexDef) -> dict[str, Any]:
    props: dict[str, Any] = {
        "index_name": index.name,
        "partition_key": _attribute(index.partition),
        "projection_type": _PROJECTIONS[index.projection],
    }
    if index.sort:
        props["sort_key"] = _attribute(index.sort)
    if index.projection == "INCLUDE":
        props["non_key_attributes"] = list(index.non_key_attributes)
    return props
