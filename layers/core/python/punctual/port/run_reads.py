"""Reads of a :class:`~punctual.port.store.Store`'s runs that every engine answers through
``list_runs``, and that an engine may answer in fewer or cheaper requests (a mixin of the Store)."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Protocol

from punctual.model import Run, RunState
from punctual.port.records import Page, RunQuery

# A job's last run is looked for among its newest runs, this many at most: past them, a job whose
# runs are all cancelled has none. The common case reads one (its newest run was not cancelled); an
# hour of every-minute runs skipped under overlap=forbid behind a long run is 60.
LAST_RUN_SCAN = 100


class _ListsRuns(Protocol):
    def list_runs(self, job_id: str, query: RunQuery) -> Page[Run]: ...


class RunReads:
    """What a Store adds over ``list_runs`` (see :class:`~punctual.port.store.Store`)."""

    def newest_run_times(self: _ListsRuns, job_ids: Collection[str], until: int) -> dict[str, int | None]:
        """Each job's last run due by ``until``: the ``scheduled_at`` of its newest stored run that was
        not cancelled, whatever created it (schedule, trigger, dependency release, replay), read
        strongly consistent. None for a job whose :data:`LAST_RUN_SCAN` newest runs were all
        cancelled (skipped instants, calendar skips, cancelled runs); jobs without a run are left out.

        Here one ``list_runs`` of one run per job, and one of :data:`LAST_RUN_SCAN` when that one was
        cancelled; the aws engine asks for two attributes, concurrently.
        """
        found: dict[str, int | None] = {}
        for job_id in set(job_ids):
            runs = self.list_runs(job_id, RunQuery(until=until, limit=1)).items
            if runs and runs[0].state is RunState.CANCELLED:
                runs = self.list_runs(job_id, RunQuery(until=until, limit=LAST_RUN_SCAN)).items
            if runs:
                found[job_id] = last_run_at((run.scheduled_at, run.state) for run in runs)
        return found


def last_run_at(runs: Iterable[tuple[int, RunState | str]]) -> int | None:
    """The ``scheduled_at`` of the first run of ``runs`` (``scheduled_at``, state; newest first) that
    was not cancelled, None if each was."""
    return next((at for at, state in runs if state != RunState.CANCELLED), None)
