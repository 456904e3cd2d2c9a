"""Reads of a :class:`~punctual.port.store.Store`'s runs that every engine answers through
``list_runs``, and that an engine may answer in fewer or cheaper requests (a mixin of the Store)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from punctual.model import Run
from punctual.port.records import Page, RunQuery


class _ListsRuns(Protocol):
    def list_runs(self, job_id: str, query: RunQuery) -> Page[Run]: ...


class RunReads:
    """What a Store adds over ``list_runs`` (see :class:`~punctual.port.store.Store`)."""

    def newest_run_times(self: _ListsRuns, job_ids: Collection[str], until: int) -> dict[str, int]:
        """The ``scheduled_at`` of each job's newest stored run due by ``until``, whatever created it
        (schedule, trigger, dependency release), read strongly consistent; jobs without one are left out.

        Here one ``list_runs`` per job; the aws engine asks for one key attribute, concurrently.
        """
        newest = {job_id: self.list_runs(job_id, RunQuery(until=until, limit=1)).items for job_id in set(job_ids)}
        return {job_id: runs[0].scheduled_at for job_id, runs in newest.items() if runs}
