"""Table, index and queue definitions: the one source of truth.

The ``aws`` engine's local bootstrap (``create_table_request``) and the CDK app
(``infra/``) both build their resources from these definitions, so the deployed schema and the
schema the tests run against cannot drift apart. The ``embedded`` engine mirrors the same tables
in SQLite (``punctual.engines.embedded.schema``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

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
# docs/decisions.md, "Write budget").
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
# Scheduler shard ownership ("shard" / "<n>") and owner alerts ("alert#<owner>" / "<run_id>").
LEASES = TableDef(
    logical_name="leases",
    partition=KeyAttr("pk", "S"),
    sort=KeyAttr("sk", "S"),
    ttl_attribute="expires_ttl",
)

TABLES: tuple[TableDef, ...] = (JOBS, RUNS, LEASES)

# -- queues -------------------------------------------------------------------------------------
# max_receives is the backstop for a message that crashes its worker every time; ordinary
# retries are counted on the run (max_retries <= 20), and a worker holding a message keeps it
# hidden by extending its visibility, so healthy runs stay far below this count.
DEAD_LETTER_QUEUE = QueueDef(logical_name="dispatch-dlq", visibility_timeout_s=60, retention_s=14 * 24 * 3600)
DISPATCH_QUEUE = QueueDef(
    logical_name="dispatch",
    visibility_timeout_s=60,
    retention_s=4 * 24 * 3600,
    max_receives=25,
    dead_letter=DEAD_LETTER_QUEUE.logical_name,
)
QUEUES: tuple[QueueDef, ...] = (DEAD_LETTER_QUEUE, DISPATCH_QUEUE)

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
