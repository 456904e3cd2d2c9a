"""The ``aws`` engine's reservations: a scheduled run held for its instant by one worker
(``Store.reserve_runs``), and the confirm that begins its attempt once its call was written
(``LeaseRequest.confirm``), or the confirm merged into the finish when the call was answered
first (``Finish.confirm``). See :mod:`punctual.execution.reserving` for the protocol.

A mixin of :class:`~punctual.engines.aws.store.DynamoStore`; the conditions are named in
:mod:`punctual.engines.aws.conditions` (``RESERVABLE``, ``CONFIRMABLE``, ``CONFIRMED_FINISH``).
"""

from __future__ import annotations

from collections.abc import Sequence

from punctual import rules
from punctual.engines.aws import conditions as c
from punctual.engines.aws import items as it
from punctual.engines.aws import updates as u
from punctual.engines.aws.items import n, s
from punctual.engines.aws.tables import Tables
from punctual.model import Run, RunState
from punctual.port import Finish, LeaseOutcome, LeaseRequest, LeaseResult, Reservation


class DynamoReservations:
    """Reserve and confirm writes of :class:`~punctual.engines.aws.store.DynamoStore`."""

    _tables: Tables
    runs_table: str
    retention_days: int

    def _tally(self, run: Run) -> None:
        raise NotImplementedError

    def _confirm(self, request: LeaseRequest, worker_id: str, now: int) -> LeaseResult:
        """The confirm of this worker's reservation (``rules.confirms``): one conditional write; the
        result is ``rules.leased`` of the seen copy, or HELD (the reservation was lost: no lease)."""
        seen = request.seen
        assert seen is not None
        condition = {"worker": s(worker_id), "seen_attempt": n(seen.attempt), "scheduled": s(RunState.SCHEDULED.value)}
        lease = u.leased_expression(worker_id, now, now + request.lease_ms).request(c.CONFIRMABLE, **condition)
        written = self._tables.update(
            self.runs_table, it.run_key(request.job_id, request.scheduled_at), lease, returns="NONE"
        )
        if written.applied:
            return LeaseResult(LeaseOutcome.LEASED, rules.leased(seen, worker_id, now, request.lease_ms))
        found = None if written.item is None else it.item_to_run(written.item)
        outcome = rules.lease_outcome(found, now, worker_id)
        return LeaseResult(LeaseOutcome.HELD if outcome is LeaseOutcome.LEASED else outcome, found)

    def _confirmed_finish(self, finish: Finish) -> Run | None:
        """``Finish.confirm``: the confirm and the finish in one conditional write
        (``CONFIRMED_FINISH``, as the confirm's); the run as written, or None (the reservation was
        lost: nothing is written, the caller drops the answer)."""
        hold, leased = finish.hold, finish.leased
        if leased is None:
            raise ValueError("a confirmed finish needs the run as leased")
        rules.check_transition(RunState.RUNNING, finish.change.state)  # as its finish would
        expr = u.confirmed_finish_expression(finish.change, leased, retention_days=self.retention_days)
        condition = {
            "worker": s(hold.worker_id),
            "seen_attempt": n(hold.attempt - 1),
            "scheduled": s(RunState.SCHEDULED.value),
        }
        request = expr.request(c.CONFIRMED_FINISH, **condition)
        key = it.run_key(hold.job_id, hold.scheduled_at)
        written = self._tables.update(self.runs_table, key, request, old_on_failure=False)
        if not written.applied or written.item is None:
            return None
        finished = it.item_to_run(written.item)
        if finished.state.is_terminal:
            self._tally(finished)
        return finished

    def reserve_runs(self, reservations: Sequence[Reservation], worker_id: str, now: int) -> list[Run | None]:
        def one(r: Reservation) -> Run | None:
            expr = c.Expression().set("worker_id = :worker", worker=s(worker_id))
            expr.set("lease_expires_at = :until", until=n(r.until))
            request = expr.request(
                c.RESERVABLE,
                scheduled=s(RunState.SCHEDULED.value),
                seen_attempt=n(r.seen.attempt),
                now=n(now),
            )
            key = it.run_key(r.seen.job_id, r.seen.scheduled_at)
            applied = self._tables.update(self.runs_table, key, request, returns="NONE", old_on_failure=False).applied
            return rules.reserved(r.seen, worker_id, r.until) if applied else None

        return self._tables.each(one, reservations)
