"""The ``aws`` engine's part of run outcomes: the pause a failure streak decides, and the notification
outbox (``punctual.port.outcomes``), on DynamoDB.

A mixin of :class:`~punctual.engines.aws.store.DynamoStore`.

- The pause is one conditional UpdateItem of the job's head (:mod:`.job_items`), as a claim's
  advance is: status, ``paused_after``, ``updated_at`` and ``version``, ``next_run_at`` removed
  (the ``due`` index entry goes), conditioned on the version read and the job still active. The
  spec item is not written, so its ``spec_version`` still matches the head's.
- A notification is one item of the leases table, key ``notify#<job_id>`` / ``<scheduled_at>``, its
  :class:`Notification` as JSON in ``doc`` beside ``state``, ``tries`` and ``next_at``. While it is
  pending it carries ``outbox_shard``, which puts it in the sparse ``outbox`` index (key
  ``outbox_shard``, ``next_at``; ``punctual.resources``); settling it removes the attribute.
  Items leave through TTL with their run's retention (``expires_ttl``).

Write units, only for jobs with ``notify``: the insert 1 + its outbox entry 1; each try 1 (+ 2 for
the outbox entry moved to the next try, or 1 removed when it settles).
"""

from __future__ import annotations

from typing import Any

from punctual import ids
from punctual.engines.aws import conditions as c
from punctual.engines.aws import items as it
from punctual.engines.aws.items import Item, Key, n, s, ttl_seconds
from punctual.engines.aws.tables import Tables
from punctual.model import Job, JobStatus, Notification, NotificationState
from punctual.resources import OUTBOX_INDEX, OUTBOX_SHARDS

_DAY_S = 86_400
_PENDING = s(NotificationState.PENDING.value)


class DynamoOutcomes:
    """Failure pauses and notifications in the jobs and leases tables (see the module docstring)."""

    _tables: Tables
    jobs_table: str
    leases_table: str
    retention_days: int

    def pause_for_failures(self, job: Job, run_id: str, now: int) -> bool:
        expression = (
            c.Expression()
            .set("#status = :paused", paused=s(JobStatus.PAUSED.value))
            .set("paused_after = :run", run=s(run_id))
            .set("updated_at = :now", now=n(now))
            .set("version = :version", version=n(job.version + 1))
            .remove("next_run_at")
        )
        request = expression.request(
            c.STILL_ACTIVE_AS_READ, expected_version=n(job.version), active=s(JobStatus.ACTIVE.value)
        )
        key = it.job_key(job.id)
        written = self._tables.update(
            self.jobs_table, key, request, returns="NONE", old_on_failure=False, conflict_refuses=True
        )
        return written.applied

    def add_notification(self, notification: Notification) -> bool:
        item = self._notification_item(notification)
        return self._tables.put(self.leases_table, item, c.guarded(c.NOTIFICATION_NOT_EXISTS)).applied

    def due_notifications(self, now: int, limit: int) -> list[Notification]:
        keys: list[Key] = []
        for shard in range(OUTBOX_SHARDS):
            if len(keys) >= limit:
                break
            request: dict[str, Any] = {
                "TableName": self.leases_table,
                "IndexName": OUTBOX_INDEX.name,
                "KeyConditionExpression": "outbox_shard = :shard AND next_at <= :now",
                "ExpressionAttributeValues": {":shard": n(shard), ":now": n(now)},
                "Limit": max(1, limit - len(keys)),
            }
            keys.extend({"pk": item["pk"], "sk": item["sk"]} for item in self._tables.query_all(request, max_pages=1))
        # the index is eventually consistent: each item is read again, and one settled meanwhile left out
        found = self._tables.each(lambda key: self._tables.get(self.leases_table, key), keys[:limit])
        due = [_notification(item) for item in found if item is not None]
        return sorted(
            (one for one in due if one.state is NotificationState.PENDING and one.next_at <= now),
            key=lambda one: one.next_at,
        )

    def update_notification(self, seen: Notification, updated: Notification) -> bool:
        expression = (
            c.Expression()
            .set("doc = :doc", doc=s(updated.model_dump_json()))
            .set("#state = :state", state=s(updated.state.value))
            .set("tries = :tries", tries=n(len(updated.tries)))
            .set("next_at = :next", next=n(updated.next_at))
        )
        if updated.state is not NotificationState.PENDING:
            expression.remove("outbox_shard")  # it leaves the outbox index
        request = expression.request(c.NOTIFICATION_AS_READ, pending=_PENDING, seen_tries=n(len(seen.tries)))
        key = _key(seen.job_id, seen.scheduled_at)
        return self._tables.update(self.leases_table, key, request, returns="NONE", old_on_failure=False).applied

    def get_notification(self, job_id: str, scheduled_at: int) -> Notification | None:
        item = self._tables.get(self.leases_table, _key(job_id, scheduled_at), consistent=False)
        return None if item is None else _notification(item)

    def _notification_item(self, notification: Notification) -> Item:
        one = notification
        # the run's retention (a run's expires_at includes it), else the deployment's from now
        retained = ttl_seconds(one.created_at) + self.retention_days * _DAY_S
        expires = one.expires_at if one.expires_at is not None else retained
        item: Item = {
            **_key(one.job_id, one.scheduled_at),
            "doc": s(one.model_dump_json()),
            "state": s(one.state.value),
            "tries": n(len(one.tries)),
            "next_at": n(one.next_at),
            "expires_ttl": n(expires),
        }
        if one.state is NotificationState.PENDING:
            item["outbox_shard"] = n(ids.shard_of(one.run_id, OUTBOX_SHARDS))
        return item


def _key(job_id: str, scheduled_at: int) -> Key:
    return {"pk": s(f"notify#{job_id}"), "sk": s(str(scheduled_at))}


def _notification(item: Item) -> Notification:
    return Notification.model_validate_json(item["doc"]["S"])
