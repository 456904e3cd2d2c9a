"""The ``aws`` engine's calendars: items of the leases table, and their users from the jobs' ``by_calendar`` index.

A mixin of :class:`~punctual.engines.aws.store.DynamoStore` (the ``calendars`` part of the port, and
through :class:`~punctual.engines.aws.idempotency.DynamoIdempotency` its ``idempotency`` part).
Items (in the ``leases`` table, partition ``pk`` / sort ``sk``): ``calendar#<owner>`` / ``<name>``,
with the calendar as JSON in ``doc`` and its ``version``. A write is a PutItem conditioned on the
version read (``CALENDAR_AT``, or ``CALENDAR_ABSENT`` for a new one). A delete marks the item
``deleted`` and lets TTL remove it (nothing in the stack may DeleteItem): reads skip marked items, and
a new calendar of the same name replaces one. No new table, so no new grant but the scheduler's read.

The users of a calendar are the jobs whose spec item carries ``calendar_of`` (a digest of owner and
calendar name, written with the job while it is not deleted): the sparse, keys-only ``by_calendar``
index of the jobs table. A claim never writes a spec item, so the index costs nothing per run.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from punctual.engines.aws.idempotency import DynamoIdempotency
from punctual.engines.aws.items import Item, n, s
from punctual.engines.aws.tables import Tables
from punctual.errors import ConcurrentModification
from punctual.model.calendars import Calendar
from punctual.model.stored import StoredReader
from punctual.resources import BY_CALENDAR_INDEX

_CALENDARS = StoredReader(Calendar)
_SPEC_SUFFIX = "#spec"  # as engines.aws.job_items names a job's spec item

# -- named conditions ------------------------------------------------------------------------------
CALENDAR_ABSENT = "attribute_not_exists(pk) OR deleted = :yes"
CALENDAR_AT = "version = :expected AND attribute_not_exists(deleted)"


def calendar_key(owner: str, name: str) -> dict[str, Any]:
    return {"pk": s(f"calendar#{owner}"), "sk": s(name)}


def calendar_of(owner: str, name: str) -> str:
    """The ``by_calendar`` index key of ``owner``'s calendar ``name`` (fixed length, whatever the owner)."""
    return hashlib.sha256(f"{owner}\x00{name}".encode()).hexdigest()[:32]


class DynamoCalendars(DynamoIdempotency):
    """Calendars in DynamoDB (see the module docstring)."""

    _tables: Tables
    leases_table: str
    jobs_table: str

    def put_calendar(self, calendar: Calendar, expected_version: int | None) -> None:
        item: Item = {
            **calendar_key(calendar.owner, calendar.name),
            "version": n(calendar.version),
            "doc": s(calendar.model_dump_json()),
        }
        if expected_version is None:
            guard = {"ConditionExpression": CALENDAR_ABSENT, "ExpressionAttributeValues": {":yes": {"BOOL": True}}}
        else:
            guard = {
                "ConditionExpression": CALENDAR_AT,
                "ExpressionAttributeValues": {":expected": n(expected_version)},
            }
        if not self._tables.put(self.leases_table, item, guard).applied:
            raise _changed(calendar.name)

    def get_calendar(self, owner: str, name: str) -> Calendar | None:
        item = self._tables.get(self.leases_table, calendar_key(owner, name))
        return None if item is None or "deleted" in item else _CALENDARS.json(item["doc"]["S"])

    def list_calendars(self, owner: str) -> list[Calendar]:
        request = {
            "TableName": self.leases_table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": s(f"calendar#{owner}")},
            "ConsistentRead": True,
        }
        return [_CALENDARS.json(item["doc"]["S"]) for item in self._tables.query_all(request) if "deleted" not in item]

    def delete_calendar(self, owner: str, name: str, expected_version: int) -> None:
        request = {
            "UpdateExpression": "SET deleted = :yes, expires_ttl = :now",
            "ConditionExpression": CALENDAR_AT,
            "ExpressionAttributeValues": {
                ":yes": {"BOOL": True},
                ":now": n(int(time.time())),
                ":expected": n(expected_version),
            },
        }
        if not self._tables.update(self.leases_table, calendar_key(owner, name), request, returns="NONE").applied:
            raise _changed(name)

    def calendar_users(self, owner: str, name: str, limit: int) -> list[str]:
        if limit <= 0:
            return []
        page = self._tables.client.query(
            TableName=self.jobs_table,
            IndexName=BY_CALENDAR_INDEX.name,
            KeyConditionExpression="calendar_of = :key",
            ExpressionAttributeValues={":key": s(calendar_of(owner, name))},
            Limit=limit,
        )
        return sorted(item["job_id"]["S"].removesuffix(_SPEC_SUFFIX) for item in page.get("Items", []))


def _changed(name: str) -> ConcurrentModification:
    return ConcurrentModification(f"calendar {name} changed meanwhile; read it again", field="name")
