"""The run and shard-lease rules, as pure functions over the domain models.

Engines own I/O; these functions own the rules. The ``embedded`` engine applies them inside one
SQLite write transaction; the ``aws`` engine expresses the same rules as DynamoDB condition
expressions (``punctual.engines.aws.conditions``), and the contract suite proves both agree.

Run lease timeline (one attempt)::

    scheduled ──lease──> running(attempt=n, worker=w, until=t) ──finish(w, n)──> terminal
                            │                      └──finish(w, n, retry)──> retrying ──lease──> running(n+1)
                            └── t passes, w silent ──lease by w'──> running(attempt=n+1, worker=w')
                                                                  (w's finish is now refused: attempt != n)
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from punctual.errors import InvalidTransition
from punctual.model import (
    MAX_ATTEMPTS_KEPT,
    MAX_ERROR_CHARS,
    RUN_TRANSITIONS,
    Attempt,
    AttemptOutcome,
    Overlap,
    Run,
    RunState,
    Trigger,
    Withdrawal,
    copy_run,
    truncate,
)
from punctual.port import LeaseOutcome, RunChange, ShardLease


def lease_outcome(run: Run | None, now: int, worker_id: str | None = None) -> LeaseOutcome:
    """Whether ``worker_id`` may lease ``run`` at ``now``, and if not, why. A scheduled run another
    worker reserved for its instant (:func:`reserved_by_another`) is HELD until the reservation ends."""
    if run is None:
        return LeaseOutcome.NOT_FOUND
    if run.state is RunState.SCHEDULED:
        return LeaseOutcome.HELD if reserved_by_another(run, worker_id, now) else LeaseOutcome.LEASED
    if run.state is RunState.RETRYING:
        ready = run.next_attempt_at is None or run.next_attempt_at <= now
        return LeaseOutcome.LEASED if ready else LeaseOutcome.NOT_READY
    if run.state is RunState.RUNNING:
        expired = run.lease_expires_at is not None and run.lease_expires_at < now
        return LeaseOutcome.LEASED if expired else LeaseOutcome.HELD
    if run.state is RunState.ACCEPTED:  # its callback ends it, or the reaper times it out: never a lease
        return LeaseOutcome.HELD
    return LeaseOutcome.FINISHED


# -- reservations: a run held for its instant, before its attempt begins ------------------------
#
#   scheduled ──reserve(w, until)──> scheduled, reserved by w (attempt unchanged: no attempt yet)
#       │                                │ w writes the call at the instant, then confirms:
#       │                                └──confirm(w, attempt as seen)──> running(attempt + 1, w)
#       └── until passes, w silent (dead, stalled): any worker may lease it, as if never reserved
#
# A reservation is a scheduled run's worker_id and lease_expires_at: another worker's lease finds
# it HELD until it ends. The attempt is counted only by the confirm, written after the call began.

RESERVATION_GRACE_MS = 3_000  # a reservation lasts until the instant plus this: the confirm lands before
# (one batch once the burst's answers were read, ~1 s), and a holder that died gives its runs back
# this soon after, within the message's visibility


def reserved_by_another(run: Run, worker_id: str | None, now: int) -> bool:
    """``run`` is scheduled and reserved by a worker other than ``worker_id`` until after ``now``."""
    return (
        run.state is RunState.SCHEDULED
        and run.worker_id is not None
        and run.worker_id != worker_id
        and run.lease_expires_at is not None
        and run.lease_expires_at >= now
    )


def reservable(run: Run | None, worker_id: str, now: int) -> bool:
    """``worker_id`` may reserve ``run``: scheduled, and not reserved by another worker until after ``now``."""
    return run is not None and run.state is RunState.SCHEDULED and not reserved_by_another(run, worker_id, now)


def reserved(run: Run, worker_id: str, until: int) -> Run:
    """``run`` after ``worker_id`` reserved it until ``until``: the run itself is unchanged."""
    return copy_run(run, {"worker_id": worker_id, "lease_expires_at": until})


def confirms(run: Run | None, worker_id: str, attempt: int) -> bool:
    """The confirm of a reservation qualifies: scheduled, reserved by ``worker_id`` (expired or not:
    nobody else took it), at the attempt it was reserved at."""
    return run is not None and run.state is RunState.SCHEDULED and run.worker_id == worker_id and run.attempt == attempt


def lease_is_live(run: Run, now: int) -> bool:
    """A worker holds ``run`` at ``now``: running, and its lease has not ended."""
    return lease_outcome(run, now) is LeaseOutcome.HELD


def attempt_allowed(attempt: int, max_retries: int) -> bool:
    """Attempt number ``attempt`` (1-based) may execute.

    Every attempt counts, including one whose worker vanished (a crash, an OOM, a Lambda timeout):
    so a run executes at most ``max_retries + 1`` times, whoever notices the loss (the worker that
    takes the lease over, or the reaper).
    """
    return attempt <= max_retries + 1


def is_takeover(run: Run) -> bool:
    """A lease of a running run is a takeover of an expired lease (the holder vanished)."""
    return run.state is RunState.RUNNING


def takeover_record(run: Run) -> Attempt:
    """The log entry for an attempt whose worker vanished without finishing."""
    return Attempt(
        number=run.attempt,
        worker_id=run.worker_id,
        started_at=run.started_at,
        finished_at=run.lease_expires_at,
        outcome=AttemptOutcome.LEASE_EXPIRED,
        error="lease expired without a finish (worker stopped or lost)",
    )


def leased(run: Run, worker_id: str, now: int, lease_ms: int) -> Run:
    """``run`` after a successful lease by ``worker_id`` at ``now``: its attempt begins now."""
    attempts = [*run.attempts, takeover_record(run)] if is_takeover(run) else run.attempts
    until = now + lease_ms
    return copy_run(
        run,
        {
            "state": RunState.RUNNING,
            "attempt": run.attempt + 1,
            "worker_id": worker_id,
            "lease_expires_at": until,
            "deadline_at": until,
            "started_at": run.started_at if run.started_at is not None else now,
            "next_attempt_at": None,
            "note": None,  # a waiting run's reason ends with the wait (the attempt keeps it: Attempt.waited)
            "attempts": bounded(attempts),
        },
    )


def holds_lease(run: Run | None, worker_id: str, attempt: int) -> bool:
    """The caller still holds the lease: running, same worker and same attempt (expired or not)."""
    return run is not None and run.state is RunState.RUNNING and run.worker_id == worker_id and run.attempt == attempt


def unchanged_since(stored: Run | None, read: Run) -> bool:
    """Compare-and-set guard of :meth:`Store.transition_run`."""
    return (
        stored is not None
        and stored.state is read.state
        and stored.attempt == read.attempt
        and stored.lease_expires_at == read.lease_expires_at
    )


def check_transition(current: RunState, new: RunState) -> None:
    """Raise :class:`InvalidTransition` unless ``RUN_TRANSITIONS`` allows ``current`` → ``new``.

    A change that keeps the state is not a transition and is always allowed: the reaper pushing
    the deadline of a run it resends, or an attempt's record added to the log of a run cancelled
    under it. Both engines call this before any finish or transition is written.
    """
    if new is not current and new not in RUN_TRANSITIONS[current]:
        raise InvalidTransition(f"a run cannot go from {current.value} to {new.value}")


def apply_change(run: Run, change: RunChange) -> Run:
    """``run`` after ``change`` (the in-memory meaning of a finish or transition).

    Raises :class:`InvalidTransition` if the change is not a transition ``RUN_TRANSITIONS`` allows.
    """
    check_transition(run.state, change.state)
    update: dict[str, object] = {"state": change.state, "deadline_at": change.deadline_at}
    if change.append is not None:
        update["attempts"] = bounded([*run.attempts, change.append])
    # each field by name (not a getattr loop: the worker applies this to every run it finishes)
    if change.finished_at is not None:
        update["finished_at"] = change.finished_at
    if change.next_attempt_at is not None:
        update["next_attempt_at"] = change.next_attempt_at
    if change.attempt is not None:
        update["attempt"] = change.attempt
    if change.note is not None:
        update["note"] = change.note
    if change.state is not RunState.RETRYING:
        update["next_attempt_at"] = None
    if change.clear_lease:
        update["worker_id"] = None
        update["lease_expires_at"] = None
    elif change.lease_until is not None:
        update["lease_expires_at"] = change.lease_until
    return copy_run(run, update)


# -- callbacks: an attempt a callback job's target accepted (HTTP 202) -----------------------------
#
#   running(n, w) ──202──> accepted(n, w, until) ──heartbeat──> accepted(n, w, until')
#        │                      └──complete──> succeeded | failed | retrying | dead
#        │                      └──until passes (reaper)──> retrying | dead | failed (a timeout)
#        └──complete (before the worker recorded the 202)──> the same ends; the worker's finish is refused
#
# A callback acts on the attempt its token names (seen: the run as read, at that attempt and worker).


def callback_open(stored: Run | None, seen: Run, now: int) -> bool:
    """A callback of ``seen``'s attempt may write ``stored``: still that attempt of that worker, running
    or accepted, and its deadline (``lease_expires_at``) not passed at ``now``."""
    return (
        stored is not None
        and stored.state in (RunState.RUNNING, RunState.ACCEPTED)
        and stored.attempt == seen.attempt
        and stored.worker_id == seen.worker_id
        and (stored.lease_expires_at or 0) >= now
    )


def beaten(run: Run, now: int, until: int | None, progress: str | None) -> Run:
    """``run`` after a heartbeat at ``now`` (``Store.callback_beat``): ``until`` moves an accepted
    attempt's deadline; a running one keeps its worker's lease."""
    update: dict[str, object] = {"heartbeat_at": now, "progress": progress}
    if until is not None:
        update["lease_expires_at"] = until
        update["deadline_at"] = until
    return copy_run(run, update)


def bounded(attempts: list[Attempt]) -> list[Attempt]:
    """Keep the newest ``MAX_ATTEMPTS_KEPT`` attempt records."""
    return attempts[-MAX_ATTEMPTS_KEPT:]


# -- withdrawal: what the user committed before the instant decides it ---------------------------
#
# The worker reads the job at the run's instant and says why it withdraws the run (a paused job,
# a schedule that lost the instant); the lease decides, on the run as stored, whether that
# applies: only at the run's first lease (a run that began keeps its retries), and only to the
# triggers concerned (a manual run of a paused job is an explicit request: it runs).

_WITHDRAWN_TRIGGERS = {
    Withdrawal.PAUSED: frozenset({Trigger.SCHEDULE, Trigger.CATCHUP, Trigger.DEPENDENCY}),
    Withdrawal.OFF_SCHEDULE: frozenset({Trigger.SCHEDULE, Trigger.CATCHUP}),
}
_WITHDRAWN_NOTES = {
    Withdrawal.PAUSED: "cancelled: the job was paused before this run's instant",
    Withdrawal.OFF_SCHEDULE: "cancelled: the job's schedule changed before this instant and no longer has it",
}


def withdrawn(run: Run, withdrawal: Withdrawal | None, now: int) -> RunChange | None:
    """The change that cancels ``run`` at its first lease because of ``withdrawal``; None if it
    does not apply (no withdrawal, the run already began, or its trigger is not concerned)."""
    if withdrawal is None or run.state is not RunState.SCHEDULED or run.trigger not in _WITHDRAWN_TRIGGERS[withdrawal]:
        return None
    note = _WITHDRAWN_NOTES[withdrawal]
    return RunChange(state=RunState.CANCELLED, now=now, deadline_at=now, finished_at=now, note=note)


# -- overlap: decided at the new run's instant -------------------------------------------------
#
# A job's overlap policy is decided when its new run is first leased (a worker holds its message
# at its not_before), never when the scheduler claims it up to a lookahead earlier: by then the
# previous run may finish (forbid would skip a run that overlaps nothing) or not have started.
#
#   earlier runs, newest first:  ...  P(open?)  S(skipped)  S(skipped)  N(scheduled, being leased)
#   forbid:  some earlier run still open  -> N ends cancelled, never executed (SKIP)
#   replace: cancel every earlier open run, then lease N                       (REPLACE)
#   allow, or nothing open, or not N's first lease                           -> lease (LEASE)
#
# Both engines' lease paths apply these functions (``Store.lease_run(..., overlap=...)``).

OVERLAP_SCAN = 500  # earlier runs examined at most (skipped runs behind one long run)


class OverlapAction(StrEnum):
    LEASE = "lease"  # lease the run as usual
    SKIP = "skip"  # overlap=forbid and an earlier run is open: the run ends cancelled, never executed
    REPLACE = "replace"  # overlap=replace and earlier runs are open: cancel them, then lease the run


def overlap_applies(run: Run | None, overlap: Overlap) -> bool:
    """The policy is decided once per run: at its first lease (state scheduled), unless allow."""
    return overlap is not Overlap.ALLOW and run is not None and run.state is RunState.SCHEDULED


def overlap_blockers(overlap: Overlap, earlier: Iterable[Run]) -> list[Run]:
    """The open runs among ``earlier`` (the job's runs scheduled before the new one, newest first)
    that the policy acts on.

    The scan stops at the first run that *started* and ended: when that run was first leased, the
    same rule had settled every run before it (closed, skipped or cancelled), and a terminal run
    never reopens. Runs that never started (skipped, cancelled, lost) are stepped over. forbid needs
    one open run; replace collects them all. At most :data:`OVERLAP_SCAN` runs are read.
    """
    blockers: list[Run] = []
    for seen, run in enumerate(earlier):
        if seen >= OVERLAP_SCAN:
            break
        if run.is_open:
            blockers.append(run)
            if overlap is Overlap.FORBID:
                break
        elif run.started_at is not None:
            break
    return blockers


def overlap_action(overlap: Overlap, blockers: list[Run]) -> OverlapAction:
    if not blockers or overlap is Overlap.ALLOW:
        return OverlapAction.LEASE
    return OverlapAction.SKIP if overlap is Overlap.FORBID else OverlapAction.REPLACE


def overlap_skip(blocker: Run, now: int) -> RunChange:
    """The change that skips the new run (forbid): cancelled at its instant, never executed."""
    note = f"skipped: previous run {blocker.run_id} was still {blocker.state.value} (overlap=forbid)"
    return RunChange(state=RunState.CANCELLED, now=now, deadline_at=now, finished_at=now, note=_bounded_note(note))


def overlap_replacement(new_run: Run, now: int) -> RunChange:
    """The change that cancels an open earlier run replaced by ``new_run`` (replace)."""
    note = f"replaced by run {new_run.run_id} (overlap=replace)"
    # the lease stays: the replaced call may go on until its worker's next heartbeat (repair_slots)
    return RunChange(
        state=RunState.CANCELLED, now=now, deadline_at=now, finished_at=now, note=_bounded_note(note), clear_lease=False
    )


def _bounded_note(text: str) -> str:
    return truncate(text, MAX_ERROR_CHARS) or text


def may_acquire_shard(current: ShardLease | None, owner: str, now: int) -> bool:
    """A shard is free if unleased, expired, already ours, or held by an earlier generation of
    ours (:func:`succeeds`: a hand-over, which fences the predecessor out by the epoch)."""
    return current is None or current.expires_at < now or current.owner == owner or succeeds(owner, current.owner)


GENERATION = "@"  # a scheduler owner "<instance>@<generation>" (punctual.scheduling.invocation)


def succeeds(owner: str, previous: str) -> bool:
    """``owner`` is a later generation of the scheduler instance that ``previous`` names: both are
    ``<instance>@<generation>`` with the same instance and integer generations, ``owner``'s greater.
    Owners without a generation never succeed one another."""
    instance, mark, generation = owner.rpartition(GENERATION)
    before, previous_mark, previous_generation = previous.rpartition(GENERATION)
    if not (mark and previous_mark and instance == before):
        return False
    if not (generation.isdigit() and previous_generation.isdigit()):
        return False
    return int(generation) > int(previous_generation)


def acquired(current: ShardLease | None, shard: int, owner: str, now: int, ttl_ms: int) -> ShardLease:
    """The lease after an acquire; the epoch (fencing token) increases when the owner changes."""
    if current is not None and current.owner == owner and current.expires_at >= now:
        return ShardLease(shard, owner, current.epoch, now + ttl_ms)
    epoch = (current.epoch if current is not None else 0) + 1
    return ShardLease(shard, owner, epoch, now + ttl_ms)
