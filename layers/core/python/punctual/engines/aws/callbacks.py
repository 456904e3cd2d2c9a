"""The ``aws`` engine's part of async completion (``punctual.port.callbacks``): a callback's heartbeat
and completion, each one conditional UpdateItem of the run guarded by ``CALLBACK_OPEN``
(:mod:`.conditions`: the token's attempt, by the worker that leased it, running or accepted, its
deadline not passed). A mixin of :class:`~punctual.engines.aws.store.DynamoStore`.

No index is kept of accepted runs: :meth:`expired_acceptances` answers None and the reaper finds
them where it finds expired leases, among the open runs past their deadline (the ``open`` index,
``engines.aws.deadlines``), at no extra read or write.

Write units, only for callback jobs: a heartbeat 1 (the run item, under 1 KB; the indexes unchanged:
``open`` is keyed by the schedule), a completion as a worker's finish (1, ``open`` removed 1, the stats
counter 1), a refused one 1 (a failed conditional write still costs a unit).
"""

from __future__ import annotations

from typing import Any

from punctual.engines.aws import conditions as c
from punctual.engines.aws import items as it
from punctual.engines.aws import stats
from punctual.engines.aws import updates as u
from punctual.engines.aws.items import n, s
from punctual.engines.aws.tables import Tables
from punctual.errors import ConcurrentModification
from punctual.model import Run, RunState
from punctual.port import RunChange

_RUNNING, _ACCEPTED = s(RunState.RUNNING.value), s(RunState.ACCEPTED.value)


class DynamoCallbacks:
    """Callback writes on the runs table (see the module docstring)."""

    _tables: Tables
    runs_table: str
    leases_table: str
    retention_days: int
    stats_counters: bool

    def callback_beat(self, seen: Run, now: int, until: int | None, progress: str | None) -> Run:
        expr = c.Expression().set("heartbeat_at = :beat_at", beat_at=n(now))
        if progress is None:
            expr.remove("progress")
        else:
            expr.set("progress = :progress", progress=s(progress))
        if until is not None:
            expr.set("lease_expires_at = :until, deadline_at = :until", until=n(until))
        request = expr.request(c.CALLBACK_BEAT, **_open(seen, now), seen_state=s(seen.state.value))
        return self._callback_write(seen, request)

    def callback_complete(self, seen: Run, change: RunChange) -> Run:
        expr = u.change_expression(change, retention_days=self.retention_days)
        done = self._callback_write(seen, expr.request(c.CALLBACK_OPEN, **_open(seen, change.now)))
        if done.state.is_terminal and self.stats_counters:
            stats.tally(self._tables.client, self.leases_table, done)  # GET /stats, as a worker's finish
        return done

    def expired_acceptances(self, now: int, limit: int) -> list[Run] | None:
        return None  # found by past_deadline_runs (see the module docstring)

    def _callback_write(self, seen: Run, request: dict[str, Any]) -> Run:
        key = it.run_key(seen.job_id, seen.scheduled_at)
        written = self._tables.update(self.runs_table, key, request, old_on_failure=False)
        if not written.applied or written.item is None:
            raise ConcurrentModification(f"run {seen.run_id} changed since it was read", field="run_id")
        return it.item_to_run(written.item)


def _open(seen: Run, now: int) -> dict[str, Any]:
    """The values of ``CALLBACK_OPEN`` for a callback of ``seen``'s attempt at ``now``."""
    return {
        "running": _RUNNING,
        "accepted": _ACCEPTED,
        "token_attempt": n(seen.attempt),
        "token_worker": s(seen.worker_id or ""),
        "now": n(now),
    }
