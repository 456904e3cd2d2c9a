"""The ``aws`` engine's jobs: the jobs table (a head and a spec item per job) and its ``by_owner`` index.

A mixin of :class:`~punctual.engines.aws.store.DynamoStore` (create, read, list and update jobs;
the claim's ``due`` index and advances stay with the store). The item layout and why it is two
items: :mod:`.job_items`.

Writes: a create or an update writes both items in one ``TransactWriteItems``, conditioned on the
head (no such job; its version as read). Reads: heads strongly consistent, specs eventually
consistent, checked against the head's ``spec_version``; a spec that does not match is read again,
with its head, strongly consistent (an edit committed between the two reads).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from punctual import ids
from punctual.engines.aws import conditions as c
from punctual.engines.aws import items as it
from punctual.engines.aws import job_items as ji
from punctual.engines.aws.items import Item, n, s
from punctual.engines.aws.tables import Tables
from punctual.errors import ConcurrentModification, JobAlreadyExists, JobNotFound
from punctual.model import Job, JobStatus, RunState
from punctual.port import JobMark, Page
from punctual.port.run_reads import LAST_RUN_SCAN, last_run_at

_TORN_READS = 3  # strongly consistent re-reads of a job whose head and spec disagree, before giving up


class DynamoJobs:
    """The job methods of :class:`~punctual.engines.aws.store.DynamoStore`."""

    _tables: Tables
    jobs_table: str
    runs_table: str
    retention_days: int

    def create_job(self, job: Job) -> None:
        reasons = self._tables.transact(self.job_actions(job, None))
        if reasons is not None:
            raise job_refusal(job, None, reasons)

    def get_job(self, job_id: str) -> Job:
        head = self._tables.get(self.jobs_table, it.job_key(job_id))
        if head is None:
            raise JobNotFound(f"job {job_id} not found", field="job_id")
        if not ji.needs_spec(head):
            return ji.items_to_job(head)
        spec = self._tables.get(self.jobs_table, ji.spec_key(job_id), consistent=False)
        if ji.spec_matches(head, spec):
            return ji.items_to_job(head, spec)
        found = self._read_torn([job_id])
        if job_id not in found:
            raise JobNotFound(f"job {job_id} not found", field="job_id")
        return found[job_id]

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
        # The index projects only ``status`` (for the filter): a claim rewrites next_run_at,
        # last_run_at and version on every run, and projecting those would add an index write
        # to every claim (docs/decisions/0007). The jobs themselves are read by key.
        wanted = [item["job_id"]["S"] for item in found]
        by_id = self.get_jobs(wanted)
        return Page([by_id[job_id] for job_id in wanted if job_id in by_id], next_cursor)

    def get_jobs(self, job_ids: Collection[str]) -> dict[str, Job]:
        wanted = list(dict.fromkeys(job_ids))
        heads = self._tables.batch_get(self.jobs_table, [it.job_key(job_id) for job_id in wanted], complete=True)
        return self._with_specs({item["job_id"]["S"]: item for item in heads})

    def newest_run_times(self, job_ids: Collection[str], until: int) -> dict[str, int | None]:
        """One Query per job (newest first, two attributes, strongly consistent: a run triggered just
        before shows), concurrently: 1 read unit per job; a job whose newest run was cancelled, one
        more Query of up to ``LAST_RUN_SCAN`` - 1 runs (about 1 read unit per 4 KB of them)."""

        def newest(job_id: str) -> tuple[bool, int | None]:
            request = {
                "TableName": self.runs_table,
                "KeyConditionExpression": "job_id = :job AND scheduled_at <= :until",
                "ExpressionAttributeValues": {":job": s(job_id), ":until": n(until)},
                "ProjectionExpression": "scheduled_at, #state",
                "ExpressionAttributeNames": {"#state": "state"},
                "ScanIndexForward": False,
                "ConsistentRead": True,
            }
            page = self._tables.client.query(**request, Limit=1)
            items = page.get("Items", [])
            after = page.get("LastEvaluatedKey")
            if items and items[0]["state"]["S"] == RunState.CANCELLED and after is not None:
                items += self._tables.client.query(**request, Limit=LAST_RUN_SCAN - 1, ExclusiveStartKey=after)["Items"]
            return bool(items), last_run_at((int(i["scheduled_at"]["N"]), i["state"]["S"]) for i in items)

        wanted = list(dict.fromkeys(job_ids))
        found = zip(wanted, self._tables.each(newest, wanted), strict=True)
        return {job_id: at for job_id, (ran, at) in found if ran}

    def job_marks(self, job_ids: Collection[str]) -> dict[str, JobMark]:
        """Status and version from the heads alone: one read unit per job, whatever its payload."""
        keys = [it.job_key(job_id) for job_id in dict.fromkeys(job_ids)]
        return {
            item["job_id"]["S"]: JobMark(JobStatus(item["status"]["S"]), int(item["version"]["N"]))
            for item in self._tables.batch_get(self.jobs_table, keys, complete=True)
        }

    def update_job(self, job: Job, expected_version: int) -> Job:
        actions = self.job_actions(job.model_copy(update={"version": expected_version + 1}), expected_version)
        reasons = self._tables.transact(actions)
        if reasons is not None:
            raise job_refusal(job, expected_version, reasons)
        return ji.items_to_job(actions[0]["Put"]["Item"], actions[1]["Put"]["Item"])

    # -- shared with dependency decisions (.edges) ------------------------------------------------------

    def job_actions(self, stored: Job, expected_version: int | None) -> list[dict[str, Any]]:
        """The two ``TransactWriteItems`` actions that write ``stored``: its head, conditioned on no
        such job (``expected_version`` None) or on that version, then its spec. The head comes first:
        :func:`job_refusal` reads the first cancellation reason as the job's own."""
        if expected_version is None:
            guard = c.guarded(c.JOB_NOT_EXISTS)
        else:
            guard = c.guarded(c.VERSION_MATCHES, expected_version=n(expected_version))
        head, spec = ji.job_to_items(stored, retention_days=self.retention_days)
        put = {"TableName": self.jobs_table, "Item": head, **guard, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
        return [{"Put": put}, {"Put": {"TableName": self.jobs_table, "Item": spec}}]

    # -- reads ------------------------------------------------------------------------------------------

    def _with_specs(self, heads: dict[str, Item]) -> dict[str, Job]:
        """The jobs of ``heads`` (by id), each with its spec read eventually consistent and checked."""
        split = [job_id for job_id, head in heads.items() if ji.needs_spec(head)]
        specs = {}
        if split:
            keys = [ji.spec_key(job_id) for job_id in split]
            for item in self._tables.batch_get(self.jobs_table, keys, complete=True, consistent=False):
                specs[item["job_id"]["S"].removesuffix(ji.SPEC_SUFFIX)] = item
        jobs: dict[str, Job] = {}
        torn = []
        for job_id, head in heads.items():
            if not ji.needs_spec(head):
                jobs[job_id] = ji.items_to_job(head)
            elif ji.spec_matches(head, specs.get(job_id)):
                jobs[job_id] = ji.items_to_job(head, specs[job_id])
            else:
                torn.append(job_id)
        if torn:
            jobs.update(self._read_torn(torn))
        return jobs

    def _read_torn(self, job_ids: list[str]) -> dict[str, Job]:
        """Heads and specs of ``job_ids`` read together strongly consistent until they match (an
        edit's transaction may commit between the reads of one job's two items). Jobs whose head is
        gone are left out. Raises :class:`ConcurrentModification` if they keep disagreeing."""
        jobs: dict[str, Job] = {}
        pending = job_ids
        for _ in range(_TORN_READS):
            keys = [key for job_id in pending for key in (it.job_key(job_id), ji.spec_key(job_id))]
            items = {item["job_id"]["S"]: item for item in self._tables.batch_get(self.jobs_table, keys, complete=True)}
            still = []
            for job_id in pending:
                head, spec = items.get(job_id), items.get(job_id + ji.SPEC_SUFFIX)
                if head is None:
                    continue
                if not ji.needs_spec(head):
                    jobs[job_id] = ji.items_to_job(head)
                elif ji.spec_matches(head, spec):
                    jobs[job_id] = ji.items_to_job(head, spec)
                else:
                    still.append(job_id)
            if not still:
                return jobs
            pending = still
        raise ConcurrentModification(f"job {pending[0]} kept changing while it was read; read it again")


def job_refusal(job: Job, expected_version: int | None, reasons: list[dict[str, Any]]) -> Exception:
    """Why DynamoDB cancelled a job's write (:meth:`DynamoJobs.job_actions`), from the head's reason
    (the first action): exists, absent, another version, or a transaction in flight on it."""
    own = reasons[0] if reasons else {}
    if own.get("Code") == "ConditionalCheckFailed":
        if expected_version is None:
            return JobAlreadyExists(f"job {job.id} already exists", field="id")
        if not own.get("Item"):
            return JobNotFound(f"job {job.id} not found", field="job_id")
        version = it.get_n(own["Item"], "version")
        return ConcurrentModification(
            f"job {job.id} changed since it was read (version {version}, expected {expected_version}); "
            "read it again and retry"
        )
    return ConcurrentModification(f"job {job.id} was being changed by another request; read it again and retry")
