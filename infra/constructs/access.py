"""Least privilege, in one table: which component may do what to which table, index and queue.

Every Lambda role (and the Fargate task roles) is granted exactly the rows below, on the table's
ARN and on the ARNs of the named indexes (indexes only serve ``Query``). DynamoDB transactions
are authorized through the same per-item actions, so no action here is broader than the calls the
aws engine makes. Only the API takes transactions (a dependency decision: engines/aws/edges.py),
and only it checks items it does not write (``ConditionCheckItem`` on jobs: the jobs a cycle
check read). Nothing may DeleteItem (history leaves through TTL, shard leases are released by an
update and expire), or touch a table's configuration; only the reaper of a stack deployed without
the runs ``open`` index may Scan (it sweeps the runs table instead, ``-c open_index=false``).

The rows are exact, not generous: tests/infra/test_iam_proof.py runs every component through its
entry point against the synthesized stack and fails on a call no row allows and on a row no call
uses. Queues are granted the same way (``SEND``, ``CONSUME``, ``QUEUE_DEPTH``), never through CDK's
bundled ``grant_send_messages``/``grant_consume_messages`` (they add GetQueueUrl and
GetQueueAttributes, which the components never call: the stack gives them the URLs).
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

GET = "dynamodb:GetItem"
BATCH_GET = "dynamodb:BatchGetItem"
QUERY = "dynamodb:Query"
PUT = "dynamodb:PutItem"
UPDATE = "dynamodb:UpdateItem"
CONDITION_CHECK = "dynamodb:ConditionCheckItem"
SCAN = "dynamodb:Scan"
INDEX_ACTIONS = (QUERY,)

# Queues (SQS-managed encryption: no key to grant)
SEND = ("sqs:SendMessage",)  # SendMessageBatch is authorized as SendMessage
CONSUME = ("sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:DeleteMessage")  # batches too
QUEUE_DEPTH = ("sqs:GetQueueAttributes",)


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
        # create (put), read, list by owner (GSI by_owner, then the jobs themselves: batch get), update
        # (pause/resume/delete are conditional puts or dependency transactions); a dependency decision
        # checks that the jobs its cycle check read kept their depends_on; the jobs that name a calendar
        # (GSI by_calendar: a calendar in use is not deleted)
        "jobs": TableAccess(
            (GET, BATCH_GET, PUT, UPDATE, CONDITION_CHECK),
            indexes=(resources.BY_OWNER_INDEX.name, resources.BY_CALENDAR_INDEX.name),
        ),
        # run history (query) and GET /runs/{id}; trigger inserts a run; a callback's heartbeat and
        # completion are conditional updates of its run (punctual.execution.callbacks)
        "runs": TableAccess((GET, QUERY, PUT, UPDATE)),
        # GET /alerts reads the owner's alerts; tenant limits (GET /limits, /admin/tenants); job
        # dependencies: reverse edges written (put) and retired (update + TTL), the owner's graph
        # sequence (update), release records read; GET /stats' run counters (one query per shard);
        # calendars: put (compare-and-set), read, listed (query), deleted (marked, then TTL)
        "leases": TableAccess((GET, QUERY, PUT, UPDATE)),
    },
    SCHEDULER: {
        # read the due index, advance next_run_at conditionally; never reads whole jobs
        "jobs": TableAccess((UPDATE,), indexes=(resources.DUE_INDEX.name,)),
        # insert runs (attribute_not_exists); read a run its plan passed over (to resend it)
        "runs": TableAccess((GET, PUT)),
        # shard leases: acquire, renew, release (all updates), list (query); the calendars of the jobs
        # it claims (get, cached for 10 s: punctual.calendars.cache)
        "leases": TableAccess((GET, QUERY, UPDATE)),
    },
    WORKER: {
        # the job's target, payload and retry policy (one, or a batch's jobs at once); a failure streak
        # pauses its job (pause_after_failures: one conditional update of the job's head)
        "jobs": TableAccess((GET, BATCH_GET, UPDATE)),
        # lease, heartbeat and finish are conditional updates of an existing run; overlap forbid/replace
        # reads the job's earlier runs (query); a finish inserts the runs it releases for dependent jobs
        # (punctual.dependencies.release)
        "runs": TableAccess((GET, QUERY, PUT, UPDATE)),
        # owner alerts for dead runs, per-owner running counters, dependency release records, tenant
        # limits, concurrency slots and rate windows (punctual.tenancy), the notifications runs owe (put)
        "leases": TableAccess((GET, QUERY, PUT, UPDATE)),
    },
    REAPER: {
        # a burial's failure streak pauses its job (pause_after_failures), as a worker's does; deadline
        # alerts read the due index's old rows (cron instants nobody claimed) and those jobs
        "jobs": TableAccess((GET, UPDATE), indexes=(resources.DUE_INDEX.name,)),
        # past-deadline runs from the open-runs index, read in batches; requeue or dead-letter them
        # (compare-and-set); a burial inserts the runs it releases for dependent jobs (put) and reads
        # the job's ended runs for its failure streak and notify's recovery (query)
        "runs": TableAccess((GET, BATCH_GET, QUERY, PUT, UPDATE), indexes=(resources.OPEN_INDEX.name,)),
        # owner alerts; run counters of the runs it closes; frees leaked tenant concurrency slots; the
        # notification outbox: due ones from the outbox index, each read, tried and updated
        "leases": TableAccess((GET, QUERY, PUT, UPDATE), indexes=(resources.OUTBOX_INDEX.name,)),
    },
}


# The reaper of a stack without the open index: the same runs row, sweeping the table with Scan
# instead of querying the index (derived, so the two cannot drift apart: issue 27, item 4).
REAPER_WITHOUT_OPEN_INDEX = TableAccess((*TABLE_ACCESS[REAPER]["runs"].actions, SCAN))
# GET /stats' backlog with the open index: the due rows of the open index, then the caller's open
# runs among them in one batch (engines/aws/deadlines.py, open_runs); without the index it is not counted.
API_OPEN_RUNS = TableAccess((*TABLE_ACCESS[API]["runs"].actions, BATCH_GET), indexes=(resources.OPEN_INDEX.name,))
# A worker that pre-leases (the Fargate tier: PUNCTUAL_PRELEASE_S > 0) reads the runs it holds before
# their instant in one batch (punctual.execution.batch.hold); Lambda workers never pre-lease.
WORKER_PRELEASING = TableAccess((*TABLE_ACCESS[WORKER]["runs"].actions, BATCH_GET))


def table_access(component: str, *, open_index: bool = True, prelease: bool = False) -> dict[str, TableAccess]:
    """``component``'s rows of ``TABLE_ACCESS`` for a stack deployed with these options."""
    rows = dict(TABLE_ACCESS[component])
    if component == REAPER and not open_index:
        rows["runs"] = REAPER_WITHOUT_OPEN_INDEX
    if component == API and open_index:
        rows["runs"] = API_OPEN_RUNS
    if component == WORKER and prelease:
        rows["runs"] = WORKER_PRELEASING
    return rows


def grant_tables(
    role: iam.IRole,
    component: str,
    tables: Mapping[str, dynamodb.ITable],
    *,
    open_index: bool = True,
    prelease: bool = False,
) -> None:
    """Grant ``role`` the rows of ``component`` (:func:`table_access`) on ``tables`` (logical name -> table)."""
    rows = table_access(component, open_index=open_index, prelease=prelease)
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
