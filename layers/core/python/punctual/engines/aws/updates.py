"""Update requests of the run lifecycle, composed from the named parts in :mod:`.conditions`.

Each builder spells one arrow of the lease timeline (see :mod:`.conditions`) exactly as
:mod:`punctual.rules` applies it in memory on the embedded engine.
"""

from __future__ import annotations

from typing import Any

from punctual import rules
from punctual.engines.aws import conditions as c
from punctual.engines.aws import items as it
from punctual.engines.aws.items import n, s
from punctual.model import Run, RunState
from punctual.port import RunChange


def lease_request(worker_id: str, now: int, until: int) -> dict[str, Any]:
    """The common lease: scheduled, or retrying past its backoff at ``now`` (rules.leased)."""
    return leased_expression(worker_id, now, until).request(
        c.LEASABLE,
        scheduled=s(RunState.SCHEDULED.value),
        retrying=s(RunState.RETRYING.value),
    )


def takeover_request(seen: Run, worker_id: str, now: int, until: int) -> dict[str, Any]:
    """Take over ``seen``'s expired lease, logging the lost attempt (rules.leased on a running run)."""
    assert seen.lease_expires_at is not None  # a running run whose lease expired has one
    expr = leased_expression(worker_id, now, until)
    expr.set(
        "attempts = list_append(if_not_exists(attempts, :no_attempts), :lost)",
        no_attempts={"L": []},
        lost={"L": [it.attempt_value(rules.takeover_record(seen))]},
    )
    return expr.request(c.TAKEOVER, seen_attempt=n(seen.attempt), seen_lease=n(seen.lease_expires_at))


def leased_expression(worker_id: str, now: int, until: int) -> c.Expression:
    """The lease's fields; ``:now`` also serves the guarding conditions (a retry's backoff, an expired lease)."""
    expr = c.Expression().set("#state = :running", running=s(RunState.RUNNING.value))
    expr.set("worker_id = :worker", worker=s(worker_id))
    expr.set("lease_expires_at = :until, deadline_at = :until", until=n(until))
    expr.set("attempt = attempt + :one", one=n(1))
    expr.set("started_at = if_not_exists(started_at, :now)", now=n(now))
    return expr.remove("next_attempt_at", "note")  # a waiting run's note goes with the wait (rules.leased)


def change_expression(change: RunChange, *, retention_days: int) -> c.Expression:
    """``change`` as an update, exactly as ``rules.apply_change`` applies it in memory.

    A terminal change also arms the run's retention: the TTL attribute ``expires_at`` takes the
    value kept in ``retain_until`` (``retention_days`` from now if there is none), which is
    removed; open runs never carry a TTL, so DynamoDB cannot delete a run that is still going.
    """
    expr = c.Expression().set("#state = :state", state=s(change.state.value))
    expr.set("deadline_at = :deadline", deadline=n(change.deadline_at))
    if change.append is not None:
        expr.set(
            "attempts = list_append(if_not_exists(attempts, :no_attempts), :appended)",
            no_attempts={"L": []},
            appended={"L": [it.attempt_value(change.append)]},
        )
    if change.finished_at is not None:
        expr.set("finished_at = :finished", finished=n(change.finished_at))
    if change.attempt is not None:
        expr.set("attempt = :new_attempt", new_attempt=n(change.attempt))
    if change.note is not None:
        expr.set("note = :note", note=s(change.note))
    if change.state is RunState.RETRYING:
        if change.next_attempt_at is not None:
            expr.set("next_attempt_at = :next_attempt", next_attempt=n(change.next_attempt_at))
    else:
        expr.remove("next_attempt_at")
    if change.clear_lease:
        expr.remove("worker_id", "lease_expires_at")
    elif change.lease_until is not None:  # an accepted attempt: its lease is the heartbeat deadline
        expr.set("lease_expires_at = :lease_until", lease_until=n(change.lease_until))
    if change.state.is_terminal:
        expr.remove("open_shard", "retain_until")  # the run leaves the open index
        # update expressions read the item as it was, so retain_until is copied before it goes
        expr.set(
            "expires_at = if_not_exists(retain_until, :expires)",
            expires=n(change.now // 1000 + retention_days * 86_400),
        )
    return expr


def confirmed_finish_expression(change: RunChange, leased: Run, *, retention_days: int) -> c.Expression:
    """The confirm and the finish in one update (``Finish.confirm``): ``change`` applied to the run
    as its confirm would have leased it (``leased``: ``rules.leased`` of the run as reserved), so the
    item ends as ``rules.apply_change(leased, change)`` does in memory. Only a change that clears the
    lease qualifies (an accepted attempt keeps it: callback jobs are never reserved)."""
    if not change.clear_lease:
        raise ValueError("a confirmed finish clears the lease")
    assert leased.started_at is not None  # rules.leased sets it
    expr = change_expression(change, retention_days=retention_days)
    if change.attempt is None:
        expr.set("attempt = :new_attempt", new_attempt=n(leased.attempt))
    expr.set("started_at = if_not_exists(started_at, :started)", started=n(leased.started_at))
    if change.note is None:
        expr.remove("note")  # a waiting run's note goes with the wait (rules.leased)
    if change.state is RunState.RETRYING and change.next_attempt_at is None:
        expr.remove("next_attempt_at")
    return expr
