"""The ``aws`` engine's jobs: the jobs table and its ``by_owner`` index.

A mixin of :class:`~punctual.engines.aws.store.DynamoStore` (create, read, list and update jobs;
the claim's ``due`` index and advances stay with the store).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from punctual import ids
from punctual.engines.aws import conditions as c
from punctual.engines.aws import items as it
from punctual.engines.aws.items import Item, n, s
from punctual.engines.aws.tables import Tables
from punctual.errors import ConcurrentModification, JobAlreadyExists, JobNotFound
from punctual.model import Job, JobStatus
from punctual.port import Page


class DynamoJobs:
    """The job methods of :class:`~punctual.engines.aws.store.DynamoStore`."""

    _tables: Tables
    jobs_table: str
    retention_days: int

    def create_job(self, job: Job) -> None:
        item = it.job_to_item(job, retention_days=self.retention_days)
        if not self._tables.put(self.jobs_table, item, c.guarded(c.JOB_NOT_EXISTS)).applied:
            raise JobAlreadyExists(f"job {job.id} already exists", field="id")

    def get_job(self, job_id: str) -> Job:
        item = self._tables.get(self.jobs_table, it.job_key(job_id))
        if item is None:
            raise JobNotFound(f"job {job_id} not found", field="job_id")
        return it.item_to_job(item)

    def list_jobs(
        self, owner: str, *, status: JobStatus | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[Job]:
        request: dict[str, Any] = {
            "TableName": self.jobs_table,
            "IndexName": "by_owner",
            "KeyConditionExpression": "#owner = :owner",
            "ScanIndexForward": False,  # newest created_at first
        }
        values: dict[str, Any] = {":owner": s(owner)}
        if status is None:
            request["FilterExpression"] = "#status <> :deleted"  # deleted jobs only when asked for
            values[":deleted"] = s(JobStatus.DELETED.value)
        else:
            request["FilterExpression"] = "#status = :status"
            values[":status"] = s(status.value)
        request["ExpressionAttributeValues"] = values
        request["ExpressionAttributeNames"] = c.names_in(request["KeyConditionExpression"], request["FilterExpression"])
        if cursor is not None:
            request["ExclusiveStartKey"] = it.job_cursor_key(cursor, owner)
        found, after = self._tables.collect(request, limit, it.by_owner_key)
        next_cursor = None
        if after is not None:
            position = {"o": after["owner"]["S"], "c": int(after["created_at"]["N"]), "j": after["job_id"]["S"]}
            next_cursor = ids.encode_cursor("jobs", position)
        return Page(self._full_jobs(found), next_cursor)

    def _full_jobs(self, index_items: list[Item]) -> list[Job]:
        """The jobs behind ``by_owner`` index entries, in index order.

        The index projects only ``status`` (for the filter): a claim rewrites next_run_at,
        last_run_at and version on every run, and projecting those would add an index write
        to every claim (docs/decisions/0007).
        """
        keys = [{"job_id": item["job_id"]} for item in index_items]
        by_id = {item["job_id"]["S"]: item for item in self._tables.batch_get(self.jobs_table, keys, complete=True)}
        return [it.item_to_job(by_id[key["job_id"]["S"]]) for key in keys if key["job_id"]["S"] in by_id]

    def get_jobs(self, job_ids: Collection[str]) -> dict[str, Job]:
        keys = [it.job_key(job_id) for job_id in dict.fromkeys(job_ids)]
        return {
            item["job_id"]["S"]: it.item_to_job(item)
            for item in self._tables.batch_get(self.jobs_table, keys, complete=True)
        }

    def update_job(self, job: Job, expected_version: int) -> Job:
        stored = job.model_copy(update={"version": expected_version + 1})
        item = it.job_to_item(stored, retention_days=self.retention_days)
        written = self._tables.put(
            self.jobs_table,
            item,
            c.guarded(c.VERSION_MATCHES, expected_version=n(expected_version)),
            old_on_failure=True,
        )
        if not written.applied:
            if written.item is None:
                raise JobNotFound(f"job {job.id} not found", field="job_id")
            raise ConcurrentModification(
                f"job {job.id} changed since it was read (version {it.get_n(written.item, 'version')}, "
                f"expected {expected_version}); read it again and retry"
            )
        return it.item_to_job(item)
