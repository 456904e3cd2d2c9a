"""Table, index and queue definitions: the one source of truth.

The ``aws`` engine's local bootstrap (``create_table_request``) and the CDK app
(``infra/``) both build their resources from these definitions, so the deployed schema and the
schema the tests run against cannot drift apart. The ``embedded`` engine mirrors the same tables
in SQLite (``punctual.engines.embedded.schema``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from punctual.model.bounds import MAX_RETRIES

AttrType = Literal["S", "N"]
Projection = Literal["KEYS_ONLY", "INCLUDE", "ALL"]


@dataclass(frozen=True)
class KeyAttr:
    name: str
    type: AttrType


@dataclass(frozen=True)
class IndexDef:
    name: str
    partition: KeyAttr
    sort: KeyAttr | None
    projection: Projection
    non_key_attributes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableDef:
    logical_name: str  # "jobs"; the physical name is "<prefix>-jobs" or given by configuration
    partition: KeyAttr
    sort: KeyAttr | None
    indexes: tuple[IndexDef, ...] = ()
    ttl_attribute: str | None = None


@dataclass(frozen=True)
class QueueDef:
    logical_name: str
    visibility_timeout_s: int
    retention_s: int
    max_receives: int | None = None  # receives before the redrive moves a message to dead_letter
    dead_letter: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# -- jobs ---------------------------------------------------------------------------------------
# Sparse GSI "due": the key attributes exist only while the job is active. Its projection carries
# exactly what claiming needs (punctual.port.DueJob), never the payload or target, so a claim
# reads one small index row and writes one small index row.
# What the aws engine routes a dispatch by: a run longer than a Lambda worker may take goes to the
# long-run queue. The embedded engine has one queue and leaves them out of its due index.
ROUTING_ATTRIBUTES = ("timeout_s",)
DUE_INDEX = IndexDef(
    name="due",
    partition=KeyAttr("due_shard", "N"),
    sort=KeyAttr("next_run_at", "N"),
    projection="INCLUDE",
    non_key_attributes=(
        "owner",
        "schedule",
        "timezone",
        "jitter_s",
        "overlap",
        "catchup",
        "max_backfill",
        "last_run_at",
        *ROUTING_ATTRIBUTES,
    ),
)
# "by_owner" projects only status (the listing filter): everything a claim rewrites stays out of
# it, so claims never write this index; listings fetch the jobs by key (BatchGetItem).
BY_OWNER_INDEX = IndexDef(
    name="by_owner",
    partition=KeyAttr("owner", "S"),
    sort=KeyAttr("created_at", "N"),
    projection="INCLUDE",
    non_key_attributes=("status",),
)
JOBS = TableDef(
    logical_name="jobs",
    partition=KeyAttr("job_id", "S"),
    sort=None,
    indexes=(DUE_INDEX, BY_OWNER_INDEX),
    ttl_attribute="expires_at",
)

# -- runs ---------------------------------------------------------------------------------------
# Sparse GSI "open": key attributes exist only while a run is open (scheduled/running/retrying).
# Its sort key is the immutable scheduled_at, so leases and heartbeats never rewrite the index:
# the price is one index put at insert and one index delete at the terminal write (see
# docs/decisions/0007).
OPEN_INDEX = IndexDef(
    name="open",
    partition=KeyAttr("open_shard", "N"),
    sort=KeyAttr("scheduled_at", "N"),
    projection="KEYS_ONLY",
)
RUNS = TableDef(
    logical_name="runs",
    partition=KeyAttr("job_id", "S"),
    sort=KeyAttr("scheduled_at", "N"),
    indexes=(OPEN_INDEX,),
    ttl_attribute="expires_at",
)

# -- leases -------------------------------------------------------------------------------------
# Scheduler shard ownership ("shard" / "<n>"), owner alerts ("alert#<owner>" / "<run_id>"), and
# the notifications runs owe their jobs' notify webhooks ("notify#<job_id>" / "<scheduled_at>").
# Sparse GSI "outbox": its key attributes exist only while a notification is pending, so the reaper
# reads exactly the notifications to try (as "open" for runs); only jobs with notify write it.
OUTBOX_SHARDS = 8  # outbox_shard = hash(run id) mod this: the index's writes spread over partitions
OUTBOX_INDEX = IndexDef(
    name="outbox",
    partition=KeyAttr("outbox_shard", "N"),
    sort=KeyAttr("next_at", "N"),
    projection="KEYS_ONLY",
)
LEASES = TableDef(
    logical_name="leases",
    partition=KeyAttr("pk", "S"),
    sort=KeyAttr("sk", "S"),
    indexes=(OUTBOX_INDEX,),
    ttl_attribute="expires_ttl",
)

TABLES: tuple[TableDef, ...] = (JOBS, RUNS, LEASES)
# A deployment may drop the open index (Settings.open_index, -c open_index=false): 6 write units per
# run instead of 8; the reaper then sweeps the runs table instead (docs/decisions/0069).
RUNS_WITHOUT_OPEN_INDEX = TableDef(
    logical_name=RUNS.logical_name,
    partition=RUNS.partition,
    sort=RUNS.sort,
    indexes=(),
    ttl_attribute=RUNS.ttl_attribute,
)


def tables(*, open_index: bool = True) -> tuple[TableDef, ...]:
    """The three table definitions, the runs table with or without its ``open`` index."""
    return TABLES if open_index else (JOBS, RUNS_WITHOUT_OPEN_INDEX, LEASES)


# -- queues -------------------------------------------------------------------------------------
# Every receive of a message counts towards the redrive's maxReceiveCount, not only the receives
# that execute an attempt: a message that comes back and is hidden again (its run held by another
# worker, not ready yet, or its owner over a tenant limit) is received once more. The limit is a
# backstop for a message that kills its worker before the run is leased, or whose handling keeps
# failing; it must never dead-letter a healthy run that still has retries left, and it should be no
# higher than that: each extra receive of a poisoned message is one more failed invocation.
# Worst case for one message, from the bounds of the retry policy:
#   attempts                      MAX_RETRIES + 1 = 21 (a lost attempt counts as one)
#   x receives per attempt        1 (executes) + 1 (not ready: an early return) + 2 (held by a
#                                 duplicate's worker until its lease expires, renewed once)
#   = 21 x 4 = 84 receives,
#   + tenant waits                an owner over a limit hides the message at most
#                                 TENANT_WAIT_RECEIVES - 1 times; the receive after that resends
#                                 it fresh (ExecutionOptions.requeue_after_receives), 10 in all
#   = 94, rounded up to the next 10: 100. (It was 1,000, the SQS maximum: an erroring message
#   looped for hours.) A message that crashes its worker before the lease comes back after the
#   queue's visibility (hours on AWS), so it expires rather than reaching the dead-letter queue; the
#   reaper still finds its run through the open-runs index.
RECEIVES_PER_ATTEMPT = 1 + 1 + 2
WORST_CASE_RECEIVES = (MAX_RETRIES + 1) * RECEIVES_PER_ATTEMPT
TENANT_WAIT_RECEIVES = 10  # ExecutionOptions.requeue_after_receives may not exceed it (a test checks)
MAX_RECEIVES = -(-(WORST_CASE_RECEIVES + TENANT_WAIT_RECEIVES) // 10) * 10
# Retention: a run may retry 20 times with up to 12 h between attempts (retry.max_backoff_s), and
# its one message lives through all of them: 20 x 12 h = 10 days > the SQS default of 4. 14 days is
# the SQS maximum.
QUEUE_RETENTION_S = 14 * 24 * 3600
DEAD_LETTER_QUEUE = QueueDef(logical_name="dispatch-dlq", visibility_timeout_s=60, retention_s=QUEUE_RETENTION_S)
DISPATCH_QUEUE = QueueDef(
    logical_name="dispatch",
    visibility_timeout_s=60,
    retention_s=QUEUE_RETENTION_S,
    max_receives=MAX_RECEIVES,
    dead_letter=DEAD_LETTER_QUEUE.logical_name,
)
QUEUES: tuple[QueueDef, ...] = (DEAD_LETTER_QUEUE, DISPATCH_QUEUE)
# Runs longer than a Lambda worker may take (Settings.long_run_after_s), consumed only by the
# long-running workers (Fargate). Deployed only with them, so not in QUEUES (local bootstrap).
LONG_RUN_QUEUE = QueueDef(
    logical_name="dispatch-long",
    visibility_timeout_s=60,
    retention_s=QUEUE_RETENTION_S,
    max_receives=MAX_RECEIVES,
    dead_letter=DEAD_LETTER_QUEUE.logical_name,
)

MAX_DELAY_S = 900  # SQS DelaySeconds maximum
MAX_BATCH = 10  # SQS SendMessageBatch / ReceiveMessage maximum


def physical_name(prefix: str, logical_name: str) -> str:
    return f"{prefix}-{logical_name}"


def create_table_request(table: TableDef, name: str) -> dict[str, Any]:
    """boto3 ``create_table`` arguments for ``table`` (on-demand billing), for local bootstrap."""
    attrs: dict[str, AttrType] = {}
    for key in _key_attrs(table):
        attrs[key.name] = key.type
    request: dict[str, Any] = {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": n, "AttributeType": t} for n, t in attrs.items()],
        "KeySchema": _key_schema(table.partition, table.sort),
    }
    if table.indexes:
        request["GlobalSecondaryIndexes"] = [
            {
                "IndexName": index.name,
                "KeySchema": _key_schema(index.partition, index.sort),
                "Projection": _projection(index),
            }
            for index in table.indexes
        ]
    return request


def _key_attrs(table: TableDef) -> list[KeyAttr]:
    keys = [table.partition, *([table.sort] if table.sort else [])]
    for index in table.indexes:
        keys += [index.partition, *([index.sort] if index.sort else [])]
    return keys


def _key_schema(partition: KeyAttr, sort: KeyAttr | None) -> list[dict[str, str]]:
    schema = [{"AttributeName": partition.name, "KeyType": "HASH"}]
    if sort is not None:
        schema.append({"AttributeName": sort.name, "KeyType": "RANGE"})
    return schema


def _projection(index: IndexDef) -> dict[str, Any]:
    projection: dict[str, Any] = {"ProjectionType": index.projection}
    if index.projection == "INCLUDE":
        projection["NonKeyAttributes"] = list(index.non_key_attributes)
    return projection
