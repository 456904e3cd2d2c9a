"""DynamoDB tables, built from ``punctual.resources.TABLES`` (the one source of truth).

Every table: on-demand billing (the load is a burst at the top of each minute: provisioned
capacity would be idle 59 seconds of 60), point-in-time recovery, encryption with the AWS-managed
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
        table = dynamodb.Table(
            self,
            definition.logical_name.capitalize(),
            partition_key=_attribute(definition.partition),
            sort_key=_attribute(definition.sort) if definition.sort else None,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=definition.ttl_attribute,
            deletion_protection=self._config.deletion_protection,
            removal_policy=cdk.RemovalPolicy.RETAIN if self._config.retain_data else cdk.RemovalPolicy.DESTROY,
            warm_throughput=self._warm(definition.logical_name),
        )
        for index in definition.indexes:
            table.add_global_secondary_index(
                **_index_props(index), warm_throughput=self._warm(f"{definition.logical_name}.{index.name}")
            )
        return table

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
