"""The blocking half of the async worker after the leases (``punctual.execution.batch``): attempts
finished and their messages settled, leases beaten, a batch at a time through the port.

- :func:`settle`, after the targets answered: one :meth:`Engine.finish_and_ack` (or its two steps
  when the messages belong to a Lambda batch; a reserved run answered before its confirm is
  confirmed by its finish, ``Done.confirm``), then dependents released, alerts, retry backoffs
  and log entries on runs cancelled under their attempt. This is where a worker's run turns
  terminal: a run that owes something (a release of dependent jobs, an alert) keeps its message
  until that is done, so a crash in between does it on redelivery.
- :func:`beat`, while targets run: the leases (and the messages' visibility) extended.
- :func:`drop_or_hide`: messages the worker will not lease, deleted or let wait.

Every step is safe to repeat: a batch that raises leaves its messages to come back after their
visibility timeout.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from punctual.execution.batch import Leased, Port, wake_waiters
from punctual.execution.changes import (
    accepts,
    acks_with_finish,
    attempt_change,
    attempt_record,
    bury_change,
    log_on_cancelled_run,
)
from punctual.execution.options import Outcome
from punctual.execution.targets.types import TargetResult
from punctual.execution.waits import Waits, parked
from punctual.model import RunState
from punctual.port import Beat, Delivery, Finish
from punctual.runs import retry

logger = logging.getLogger(__name__)

# the outcome of a delivery whose run ended in a state (an enum lookup by value costs ~1 us a run)
_OUTCOME_OF = {state: Outcome(state.value) for state in RunState if state.value in Outcome.__members__.values()}


@dataclass(frozen=True, slots=True)
class Done:
    """A leased attempt after its target answered (``result``), or buried unexecuted (``result`` None)."""

    leased: Leased
    result: TargetResult | None
    started_at: int
    finished_at: int
    # answered before its attempt's confirm went out (``execution.reserving``): the finish confirms
    # it in the same write (``Finish.confirm``); refused, the answer is dropped as a refused confirm's
    confirm: bool = False


def settle(port: Port, done: Sequence[Done]) -> list[Outcome]:
    """Finish every attempt of ``done`` (one batch), then settle each message. One outcome per item.

    A succeeded (or cancelled) run's message is deleted with its finish; a dead or failed run's
    only after its owner was alerted (so a crash in between alerts on redelivery); a retrying run's
    message waits for the backoff and brings the next attempt (hidden, re-sent with a delay, or,
    for a parked run, deleted: ``punctual.execution.waits``).
    """
    now = port.clock.now_ms()
    finishes: list[Finish] = []
    records = []
    for item in done:
        leased = item.leased
        if item.result is None:
            change, record = bury_change(leased.job, leased.run, now), None
        else:
            result, job = item.result, leased.job
            accepted = accepts(job, result)
            verdict = retry.verdict(
                ok=result.ok,
                retryable=result.retryable,
                attempt=leased.run.attempt,
                max_retries=job.max_retries,
                accepted=accepted,
            )
            record = attempt_record(
                result, leased.run.attempt, port.worker_id, item.started_at, item.finished_at, leased.waited,
                accepted=accepted,
            )  # fmt: skip
            change = attempt_change(job, leased.run, verdict, record, now, options=port.options)
        # an accepted run's message goes with its finish: its row holds its deadline (the reaper's)
        ack_now = change.state is RunState.ACCEPTED or (
            change.state.is_terminal and acks_with_finish(leased.job, change.state, port.options)
        )
        ack = leased.delivery.receipt if ack_now else None
        finishes.append(Finish(leased.hold, change, ack, leased.run, confirm=item.confirm))
        records.append(record)

    runs = port.complete(finishes)
    if port.gate is not None:  # a finished attempt (retrying included) no longer runs: its slots go
        gate = port.gate
        owners = {run.owner for run in runs if run is not None}
        holding = {owner for owner in owners if gate.holds_slots(owner)}
        for item, run in zip(done, runs, strict=True):  # an accepted run keeps its slots until its end
            if (
                run is not None
                and run.state is not RunState.ACCEPTED
                and (run.owner in holding or item.leased.job.limits)
            ):
                gate.release(run.owner, item.leased.run.run_id, item.leased.job)
        try:
            wake_waiters(port)
        except Exception:  # the waiters come back on their own, after their backoff
            logger.warning("could not wake the runs waiting for the slots freed", exc_info=True)
    outcomes: list[Outcome] = []
    waits = Waits(now, port.options)
    drops: list[str] = []
    for item, finish, record, run in zip(done, finishes, records, runs, strict=True):
        leased = item.leased
        if run is None and item.confirm:  # the reservation was lost: the run comes back when it ends
            logger.warning("run %s: its reservation was lost before its attempt was confirmed", leased.run.run_id)
            outcomes.append(Outcome.LEASE_LOST)
        elif run is None:
            logger.warning("run %s attempt %d: finish refused (lease lost)", leased.run.run_id, leased.run.attempt)
            if record is not None:
                log_on_cancelled_run(port.store, leased.run, record, now)
            outcomes.append(Outcome.LEASE_LOST)
        elif run.state is RunState.RETRYING:
            assert run.next_attempt_at is not None
            waits.add(leased.delivery, run.next_attempt_at, run.owner, parked_run=parked(run))
            outcomes.append(Outcome.RETRYING)
        else:
            if finish.ack is None:
                port.owed(leased.job, run, now)
                drops.append(leased.delivery.receipt)
            outcomes.append(_OUTCOME_OF[run.state])
    waits.drop(drops)
    waits.apply(port.queue)
    return outcomes


def beat(port: Port, attempts: Sequence[Leased]) -> list[bool]:
    """Extend the lease of every attempt (and its message's visibility) by its lease length from now.

    One flag per attempt: False if its lease was lost (the caller abandons it).
    """
    now = port.clock.now_ms()
    alive = port.store.heartbeat_runs([Beat(a.hold, now + a.lease_ms) for a in attempts])
    hides: defaultdict[int, list[str]] = defaultdict(list)
    for attempt, ok in zip(attempts, alive, strict=True):
        if ok:
            hides[retry.visibility_s(attempt.lease_ms)].append(attempt.delivery.receipt)
    for visibility, receipts in hides.items():
        try:
            port.queue.extend_many(receipts, visibility)
        except Exception:  # a redelivery meanwhile is harmless: the other worker finds the run HELD
            logger.warning("could not extend %d messages", len(receipts), exc_info=True)
    return alive


def drop_or_hide(port: Port, drops: Sequence[str], early: Sequence[Delivery]) -> None:
    """Delete the messages ``drops``; let each of ``early`` (far too early) wait for its not_before
    (hidden, or re-sent with a delay: ``punctual.execution.waits``)."""
    waits = Waits(port.clock.now_ms(), port.options)
    for delivery in early:
        waits.add(delivery, delivery.not_before, delivery.extra.get("group"))
    waits.drop(list(drops))
    waits.apply(port.queue)
