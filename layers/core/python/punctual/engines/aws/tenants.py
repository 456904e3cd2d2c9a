"""The ``aws`` engine's tenant records: limits, concurrency slots and rate records in the leases table.

A mixin of :class:`~punctual.engines.aws.store.DynamoStore` (the ``tenants`` part of the port).
Items (all in the ``leases`` table, partition ``pk`` / sort ``sk``):

- ``tenant`` / ``<owner>``: the limits an operator set (written by ``punctual tenants set`` only).
- ``slots#<bucket>`` / ``<owner>``: the map ``holders`` of the runs holding the owner's
  concurrency slots (run id → when it took the slot). Taking a slot is one conditional UpdateItem
  (``size(holders) < :limit``), releasing one another: the count can never exceed the limit, and a
  run id can hold at most one slot. ``bucket`` = crc32(owner) mod ``SLOT_BUCKETS`` spreads owners
  over partitions yet lets the reaper list them with a few Queries.
  Attributes ``wait_<p>`` mark until when a run of priority ``p`` waits for a slot: a run of
  lower priority yields a free slot while one lasts (``NO_WAIT_ABOVE``, one term per higher priority).
- ``rate#<owner>`` / ``starts``: the owner's ``max_runs_per_minute`` record (``punctual.tenancy.rates``:
  ``limit``, ``next_at``, ``queue_end``, ``recent`` starts per second, ``guard_until``, ``version``), replaced by a
  PutItem conditioned on the version read (``RATE_UNCHANGED``, or ``RATE_ABSENT`` for the first),
  expired by TTL a minute after it stops mattering. ~100 bytes plus ~15 per second with starts in
  the last minute: 1 write unit per start or wait.

Owners without ``max_concurrency`` or ``max_runs_per_minute`` never touch these items.
Item size, hence write units: a slot item is ~60 bytes per holder, so taking or releasing a slot
costs 1 WCU up to ~15 holders and 1 more per further KB (see docs/decisions/0082).
"""

from __future__ import annotations

import zlib
from typing import Any

from botocore.exceptions import ClientError

from punctual.engines.aws.items import Item, n, s
from punctual.engines.aws.tables import Tables, condition_failed
from punctual.port import RateState, SlotOutcome, Tenant

SLOT_BUCKETS = 16
TENANT_PK = "tenant"
_LIMITS = ("max_jobs", "max_runs_per_minute", "max_concurrency", "api_requests_per_second")

# -- named conditions ------------------------------------------------------------------------------
SLOT_FREE = "attribute_exists(holders) AND attribute_not_exists(holders.#run) AND size(holders) < :limit"
SLOT_ITEM_ABSENT = "attribute_not_exists(pk)"
SLOT_HELD = "attribute_exists(holders.#run)"
RATE_ABSENT = "attribute_not_exists(pk)"
RATE_UNCHANGED = "version = :read"
LIVE_JOB = "#status IN (:active, :paused)"
NO_WAIT_ABOVE = "(attribute_not_exists({w}) OR {w} < :now)"  # no run of that higher priority waits now
WAIT_EARLIER = "attribute_not_exists(#w) OR #w < :until"
WAIT_STILL = "#w = :until"  # the mark is still the one its writer ends
MAX_PRIORITY = 9


def wait_attr(priority: int) -> str:
    """The slot item's attribute marking a wait of ``priority`` (``Store.mark_slot_wait``)."""
    return f"wait_{priority}"


def slot_key(owner: str) -> dict[str, Any]:
    return {"pk": s(f"slots#{zlib.crc32(owner.encode()) % SLOT_BUCKETS}"), "sk": s(owner)}


def rate_key(owner: str) -> dict[str, Any]:
    return {"pk": s(f"rate#{owner}"), "sk": s("starts")}


class DynamoTenants:
    """Tenant records in DynamoDB (see the module docstring)."""

    _tables: Tables
    leases_table: str
    jobs_table: str

    @property
    def _client(self) -> Any:
        return self._tables.client

    def put_tenant(self, tenant: Tenant) -> None:
        item: Item = {
            "pk": s(TENANT_PK),
            "sk": s(tenant.owner),
            "weight": n(tenant.weight),
            "updated_at": n(tenant.updated_at),
        }
        for name in _LIMITS:
            value = getattr(tenant, name)
            if value is not None:
                item[name] = n(value)
        self._client.put_item(TableName=self.leases_table, Item=item)

    def get_tenant(self, owner: str) -> Tenant | None:
        key = {"pk": s(TENANT_PK), "sk": s(owner)}
        item = self._client.get_item(TableName=self.leases_table, Key=key, ConsistentRead=True).get("Item")
        return None if item is None else _tenant(item)

    def list_tenants(self) -> list[Tenant]:
        request = {
            "TableName": self.leases_table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": s(TENANT_PK)},
            "ConsistentRead": True,
        }
        return [_tenant(item) for item in self._pages(request)]

    def count_live_jobs(self, owner: str, at_most: int) -> int:
        """Counted on the ``by_owner`` index (it projects status), page by page, stopping at ``at_most``."""
        request: dict[str, Any] = {
            "TableName": self.jobs_table,
            "IndexName": "by_owner",
            "KeyConditionExpression": "#owner = :owner",
            "FilterExpression": LIVE_JOB,
            "ExpressionAttributeNames": {"#owner": "owner", "#status": "status"},
            "ExpressionAttributeValues": {":owner": s(owner), ":active": s("active"), ":paused": s("paused")},
            "Select": "COUNT",
        }
        count = 0
        while count < at_most:
            page = self._client.query(**request)
            count += int(page.get("Count", 0))
            if "LastEvaluatedKey" not in page:
                break
            request = {**request, "ExclusiveStartKey": page["LastEvaluatedKey"]}
        return min(count, max(0, at_most))

    def take_slot(self, owner: str, run_id: str, limit: int, now: int, *, priority: int | None = None) -> SlotOutcome:
        above = [] if priority is None else [wait_attr(p) for p in range(priority + 1, MAX_PRIORITY + 1)]
        request: dict[str, Any] = {
            "TableName": self.leases_table,
            "Key": slot_key(owner),
            "UpdateExpression": "SET holders.#run = :now",
            "ConditionExpression": " AND ".join([SLOT_FREE, *(NO_WAIT_ABOVE.format(w=w) for w in above)]),
            "ExpressionAttributeNames": {"#run": run_id},
            "ExpressionAttributeValues": {":now": n(now), ":limit": n(limit)},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        for _ in range(2):  # the first slot of an owner creates the item, then takes the slot
            try:
                self._client.update_item(**request)
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
                old: Item | None = exc.response.get("Item")  # type: ignore[assignment,unused-ignore]
            else:
                return SlotOutcome.TAKEN
            if old is not None and "holders" in old:
                holders = old["holders"].get("M", {})
                if run_id in holders:
                    return SlotOutcome.ALREADY_HELD
                return SlotOutcome.FULL if len(holders) >= limit else SlotOutcome.YIELDED
            self._create_slot_item(owner)
        return SlotOutcome.FULL  # the item kept vanishing under us: wait rather than exceed the limit

    def mark_slot_wait(self, owner: str, priority: int, until: int) -> None:
        try:
            self._client.update_item(
                TableName=self.leases_table,
                Key=slot_key(owner),
                UpdateExpression="SET #w = :until, holders = if_not_exists(holders, :none)",
                ConditionExpression=WAIT_EARLIER,
                ExpressionAttributeNames={"#w": wait_attr(priority)},
                ExpressionAttributeValues={":until": n(until), ":none": {"M": {}}},
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise  # a later mark stands: nothing to do

    def clear_slot_wait(self, owner: str, priority: int, until: int) -> bool:
        try:
            self._client.update_item(
                TableName=self.leases_table,
                Key=slot_key(owner),
                UpdateExpression="REMOVE #w",
                ConditionExpression=WAIT_STILL,
                ExpressionAttributeNames={"#w": wait_attr(priority)},
                ExpressionAttributeValues={":until": n(until)},
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return False  # a later mark stands (another worker's runs wait)
        return True

    def release_slot(self, owner: str, run_id: str) -> bool:
        try:
            self._client.update_item(
                TableName=self.leases_table,
                Key=slot_key(owner),
                UpdateExpression="REMOVE holders.#run",
                ConditionExpression=SLOT_HELD,
                ExpressionAttributeNames={"#run": run_id},
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return False
        return True

    def slot_holders(self, owner: str) -> dict[str, int]:
        item = self._client.get_item(TableName=self.leases_table, Key=slot_key(owner), ConsistentRead=True).get("Item")
        holders = (item or {}).get("holders", {}).get("M", {})
        return {run_id: int(value["N"]) for run_id, value in holders.items()}

    def slot_owners(self) -> list[str]:
        owners: list[str] = []
        for bucket in range(SLOT_BUCKETS):
            request = {
                "TableName": self.leases_table,
                "KeyConditionExpression": "pk = :pk",
                "FilterExpression": "size(holders) > :zero",
                "ExpressionAttributeValues": {":pk": s(f"slots#{bucket}"), ":zero": n(0)},
                "ProjectionExpression": "sk",
            }
            owners += [item["sk"]["S"] for item in self._pages(request)]
        return sorted(owners)

    def get_rate_state(self, owner: str) -> RateState | None:
        item = self._client.get_item(TableName=self.leases_table, Key=rate_key(owner), ConsistentRead=True).get("Item")
        return None if item is None else _rate_state(owner, item)

    def put_rate_state(self, state: RateState) -> bool:
        forget_at = max(state.next_at, state.queue_end) + 60_000  # it decides nothing after this
        item: Item = {
            **rate_key(state.owner),
            "limit": n(state.limit),
            "next_at": n(state.next_at),
            "queue_end": n(state.queue_end),
            "recent": {"M": {str(second): n(count) for second, count in state.recent.items()}},
            "guard_until": n(state.guard_until),
            "version": n(state.version),
            "expires_ttl": n(-(-forget_at // 1000)),
        }
        first = state.version == 1
        condition = (
            {"ConditionExpression": RATE_ABSENT}
            if first
            else {
                "ConditionExpression": RATE_UNCHANGED,
                "ExpressionAttributeValues": {":read": n(state.version - 1)},
            }
        )
        try:
            self._client.put_item(TableName=self.leases_table, Item=item, **condition)
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return False
        return True

    # -- helpers -----------------------------------------------------------------------------------

    def _create_slot_item(self, owner: str) -> None:
        item = {**slot_key(owner), "owner": s(owner), "holders": {"M": {}}}
        try:
            self._client.put_item(TableName=self.leases_table, Item=item, ConditionExpression=SLOT_ITEM_ABSENT)
        except ClientError as exc:
            if not condition_failed(exc):
                raise  # someone else created it meanwhile: fine

    def _pages(self, request: dict[str, Any]) -> list[Item]:
        items: list[Item] = []
        while True:
            page = self._client.query(**request)
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return items
            request = {**request, "ExclusiveStartKey": page["LastEvaluatedKey"]}


def _tenant(item: Item) -> Tenant:
    limits = {name: int(item[name]["N"]) for name in _LIMITS if name in item}
    return Tenant(
        owner=item["sk"]["S"],
        weight=int(item.get("weight", {"N": "1"})["N"]),
        updated_at=int(item.get("updated_at", {"N": "0"})["N"]),
        **limits,
    )


def _rate_state(owner: str, item: Item) -> RateState:
    recent = {int(second): int(count["N"]) for second, count in item.get("recent", {}).get("M", {}).items()}
    return RateState(
        owner=owner,
        limit=int(item["limit"]["N"]),
        next_at=int(item["next_at"]["N"]),
        queue_end=int(item["queue_end"]["N"]),
        recent=recent,
        guard_until=int(item.get("guard_until", {"N": "0"})["N"]),
        version=int(item["version"]["N"]),
    )
