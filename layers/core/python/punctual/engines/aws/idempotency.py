"""The ``aws`` engine's idempotency records (``punctual.port.idempotency``): items of the leases table,
and the read of a job's replays in a window of its runs.

A mixin of :class:`~punctual.engines.aws.store.DynamoStore` (through
:class:`~punctual.engines.aws.calendars.DynamoCalendars`: ``store.py`` is at its size limit).
Items (in the ``leases`` table, partition ``pk`` / sort ``sk``): ``idem#<owner>`` / ``<key>``, with
``fingerprint``, ``at``, ``beat``, ``expires_at`` (ms), ``result`` once answered, and ``expires_ttl``
(seconds: DynamoDB's TTL removes it a while after it expired; reads and claims treat an expired
record as absent until then). A claim is one PutItem (``RECORD_FREE``) that returns the stored item
when it is refused (``ALL_OLD``: no second read); a renewal, takeover or answer is one UpdateItem on
the beat read (``RECORD_AT_BEAT``). No new table, index or grant: the API already writes this table.
"""

from __future__ import annotations

from typing import Any

from punctual.engines.aws.items import Item, get_s, n, s
from punctual.engines.aws.tables import Tables
from punctual.port.idempotency import IdempotencyRecord

# -- named conditions ------------------------------------------------------------------------------
RECORD_FREE = "attribute_not_exists(pk) OR expires_at <= :now"  # absent, or expired
RECORD_AT_BEAT = "attribute_exists(pk) AND attribute_not_exists(#result) AND beat = :seen"
_NAMES = {"#result": "result"}  # a reserved word


def record_key(owner: str, key: str) -> dict[str, Any]:
    return {"pk": s(f"idem#{owner}"), "sk": s(key)}


class DynamoIdempotency:
    """Idempotency records and the replay window read, in DynamoDB (see the module docstring)."""

    _tables: Tables
    leases_table: str
    runs_table: str

    def get_idempotency_record(self, owner: str, key: str, now: int) -> IdempotencyRecord | None:
        item = self._tables.get(self.leases_table, record_key(owner, key))
        record = None if item is None else _record(owner, key, item)
        return None if record is None or record.expires_at <= now else record

    def claim_idempotency_record(self, record: IdempotencyRecord, now: int) -> IdempotencyRecord:
        item: Item = {
            **record_key(record.owner, record.key),
            "fingerprint": s(record.fingerprint),
            "at": n(record.at),
            "beat": n(record.beat),
            "expires_at": n(record.expires_at),
            "expires_ttl": n(record.expires_at // 1000 + 1),
        }
        guard = {"ConditionExpression": RECORD_FREE, "ExpressionAttributeValues": {":now": n(now)}}
        written = self._tables.put(self.leases_table, item, guard, old_on_failure=True)
        if written.applied:
            return record
        if written.item is None:  # refused, yet nothing to show: read it (a refusal names an item)
            stored = self.get_idempotency_record(record.owner, record.key, now)
            return record if stored is None else stored
        return _record(record.owner, record.key, written.item)

    def update_idempotency_record(self, owner: str, key: str, seen_beat: int, beat: int, result: str | None) -> bool:
        values: dict[str, Any] = {":seen": n(seen_beat), ":beat": n(beat)}
        update = "SET beat = :beat"
        if result is not None:
            update += ", #result = :result"
            values[":result"] = s(result)
        request = {
            "UpdateExpression": update,
            "ConditionExpression": RECORD_AT_BEAT,
            "ExpressionAttributeNames": _NAMES,
            "ExpressionAttributeValues": values,
        }
        written = self._tables.update(
            self.leases_table, record_key(owner, key), request, returns="NONE", old_on_failure=False
        )
        return written.applied

    def replays_between(self, job_id: str, since: int, until: int) -> dict[int, str]:
        if since > until:
            return {}
        request = {
            "TableName": self.runs_table,
            "KeyConditionExpression": "job_id = :job AND scheduled_at BETWEEN :since AND :until",
            "FilterExpression": "attribute_exists(replay_of)",
            "ProjectionExpression": "scheduled_at, replay_of",
            "ExpressionAttributeValues": {":job": s(job_id), ":since": n(since), ":until": n(until)},
            "ConsistentRead": True,
        }
        return {int(item["scheduled_at"]["N"]): item["replay_of"]["S"] for item in self._tables.query_all(request)}


def _record(owner: str, key: str, item: Item) -> IdempotencyRecord:
    return IdempotencyRecord(
        owner=owner,
        key=key,
        fingerprint=item["fingerprint"]["S"],
        at=int(item["at"]["N"]),
        beat=int(item["beat"]["N"]),
        expires_at=int(item["expires_at"]["N"]),
        result=get_s(item, "result"),
    )
