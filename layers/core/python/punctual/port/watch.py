"""The store's part of deadline alerts (``punctual.reaping.deadlines``): the two index reads the
reaper makes to find runs that outlived their job's ``deadline_s`` and cron instants that produced no
run. Both read only what is old (scheduled, or due, before a bound a minute or more ago), so a
deployment that keeps up reads (almost) nothing. A mixin of :class:`~punctual.port.Store`."""

from __future__ import annotations

from abc import ABC, abstractmethod


class DeadlineWatch(ABC):
    """Old open runs and old due jobs, by key."""

    @abstractmethod
    def stale_open_runs(self, scheduled_before: int, limit: int) -> list[tuple[str, int]]:
        """The keys ``(job_id, scheduled_at)`` of open runs (scheduled, running, retrying) scheduled at
        or before ``scheduled_before``, at most ``limit``, oldest first as far as the engine orders
        them (aws: per ``open`` index shard, eventually consistent: a run listed may have ended;
        without that index, those the reaper's sweep of the runs table saw since the last call)."""

    @abstractmethod
    def stale_due_jobs(self, due_before: int, limit: int) -> list[tuple[str, int]]:
        """The ``(job_id, next_run_at)`` of active jobs whose ``next_run_at`` is at or before
        ``due_before`` (an instant no scheduler claimed yet), at most ``limit``, oldest first as far as
        the engine orders them (aws: per ``due`` index shard, eventually consistent)."""
