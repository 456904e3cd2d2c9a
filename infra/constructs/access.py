"""Least privilege, in one table: which component may do what to which table and index.

Every Lambda role (and the Fargate task role) is granted exactly the rows below, on the table's
ARN and on the ARNs of the named indexes (indexes only serve ``Query``). DynamoDB transactions
are authorized through the same per-item actions, so no action here is broader than the calls the
aws engine makes. Only the API takes transactions (a dependency decision: engines/aws/edges.py),
and only it checks items it does not write (``ConditionCheckItem`` on jobs: the jobs a cycle
check read). Nothing may Scan, DeleteItem (history leaves through
TTL, shard leases are released by an update and expire), or touch a table's configuration — except
the reaper of a stack deployed without the runs ``open`` index, which sweeps the runs table with
Scan instead (``-c open_index=false``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import IConstruct

from infra import constants
from infra.constructs.nag import acknowledge
from punctual import resources

GET = ("dynamodb:GetItem", "dynamodb:BatchGetItem")
READ = (*GET, "dynamodb:Query")
PUT = "dynamodb:PutItem"
UPDATE = "dynamodb:UpdateItem"
CONDITION_CHECK = "dynamodb:ConditionCheckItem"
INDEX_ACTIONS = ("dynamodb:Query",)


@dataclass(frozen=True)
class TableAccess:
    actions: tuple[str, ...]
    indexes: tuple[str, ...] = ()  # global secondary indexes the component queries


API = "api"
SCHEDULER = "scheduler"
WORKER = "worker"
REAPER = "reaper"

TABLE_ACCESS: Mapping[str, Mapping[str, TableAccess]] = {
    API: {
        # create, read, list by owner (GSI by_owner), update (pause/resume/delete are status updates);
        # a dependency decision checks that the jobs its cycle check read kept their depends_on
        "jobs": TableAccess((*READ, PUT, UPDATE, CONDITION_CHECK), indexes=(resources.BY_OWNER_INDEX.name,)),
        # run history and GET /runs/{id}; trigger inserts a run; cancel updates it
        "runs": TableAccess((*READ, PUT, UPDATE)),
        # GET /alerts and GET /stats read the owner's alerts and run counters (engines/aws/stats.py);
        # job dependencies: reverse edges written (put) and retired (update + TTL), the owner's graph
        # sequence (update), release records read
        "leases": TableAccess((*READ, PUT, UPDATE)),
    },
    SCHEDULER: {
        # read the due index, advance next_run_at conditionally; never reads whole jobs
        "jobs": TableAccess((UPDATE,), indexes=(resources.DUE_INDEX.name,)),
        # insert runs (attribute_not_exists); overlap policies read and cancel the previous run
        "runs": TableAccess((*READ, PUT, UPDATE)),
        # shard leases: acquire, renew, release (an update), list
        "leases": TableAccess((*READ, PUT, UPDATE)),
    },
    WORKER: {
        # the job's target, payload and retry policy
        "jobs": TableAccess(GET),
        # lease, heartbeat and finish are conditional updates of an existing run; a finish inserts
        # the runs it releases for dependent jobs (punctual.dependencies.release)
        "runs": TableAccess((*READ, PUT, UPDATE)),
        # owner alerts for dead runs, per-owner running counters, dependency release records, tenant
        # limits, concurrency slots and rate windows (punctual.tenancy)
        "leases": TableAccess((*READ, PUT, UPDATE)),
    },
    REAPER: {
        "jobs": TableAccess(GET),
        # past-deadline runs from the open-runs index; requeue or dead-letter them (compare-and-set);
        # a burial inserts the runs it releases for dependent jobs
        "runs": TableAccess((*READ, PUT, UPDATE), indexes=(resources.OPEN_INDEX.name,)),
        # owner alerts; run counters of the runs it closes; frees leaked tenant concurrency slots
        "leases": TableAccess((*READ, PUT, UPDATE)),
    },
}


# The reaper of a stack without the open index: the same runs row, sweeping the table with Scan
# instead of querying the index (derived, so the two cannot drift apart: a burial that releases a
# dependent inserts its run, and this row once lacked PutItem: issue 27, item 4).
REAPER_WITHOUT_OPEN_INDEX = TableAccess((*TABLE_ACCESS[REAPER]["runs"].actions, "dynamodb:Scan"))


def grant_tables(
    role: iam.IRole, component: str, tables: Mapping[str, dynamodb.ITable], *, open_index: bool = True
) -> None:
    """Grant ``role`` the ``TABLE_ACCESS`` rows of ``component`` on ``tables`` (logical name -> table)."""
    rows = dict(TABLE_ACCESS[component])
    if component == REAPER and not open_index:
        rows["runs"] = REAPER_WITHOUT_OPEN_INDEX
    for logical_name, access in rows.items():
        table = tables[logical_name]
        role.add_to_principal_policy(iam.PolicyStatement(actions=list(access.actions), resources=[table.table_arn]))
        if access.indexes:
            _check_indexes(logical_name, access.indexes)
            index_arns = [f"{table.table_arn}/index/{name}" for name in access.indexes]
            role.add_to_principal_policy(iam.PolicyStatement(actions=list(INDEX_ACTIONS), resources=index_arns))


def grant_targets(role: iam.IRole, target_arns: Iterable[str], scope: IConstruct) -> None:
    """Let ``role`` deliver runs to the operator-approved ``target_arns`` (one action per ARN kind).

    An ARN with a wildcard is acknowledged for cdk-nag on ``scope`` (the role): the operator chose it.
    """
    by_action: dict[str, list[str]] = {}
    for arn in target_arns:
        by_action.setdefault(constants.TARGET_ACTIONS[arn.split(":")[2]], []).append(arn)
    for action, arns in sorted(by_action.items()):
        role.add_to_principal_policy(iam.PolicyStatement(actions=[action], resources=sorted(arns)))
        for arn in arns:
            if "*" in arn:
                acknowledge(
                    scope,
                    "IAM5",
                    "target ARN pattern given by the operator in the target_arns context parameter",
                    finding=f"Resource::{arn}",
                )


def _check_indexes(logical_name: str, names: Iterable[str]) -> None:
    table = next(t for t in resources.TABLES if t.logical_name == logical_name)
    known = {index.name for index in table.indexes}
    missing = set(names) - known
    if missing:
        raise ValueError(f"table {logical_name} has no index {', '.join(sorted(missing))}")
