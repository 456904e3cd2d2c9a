"""Reserve, call, confirm: how a worker starts the runs it held for their instant without a write
between the instant and the calls.

Before the instant (:func:`hold_and_reserve`): the jobs and runs are read (``batch.hold``) and the
runs that qualify are *reserved* for this worker until shortly after their instant
(:meth:`Store.reserve_runs`: the run stays scheduled, no attempt is counted; another worker's lease
finds it HELD). Just before the instant (:func:`begin_reserved`, :data:`BEGIN_AHEAD_MS`): one read
of the jobs' versions decides which reserved runs go ahead as they were read; their attempts are
built in memory (``rules.leased`` of the reserved copy), and at the instant their calls are written
at once. Once their answers are in, or :data:`CONFIRM_WAIT_S` later: a call answered by then is
finished by a write that also confirms it (``Finish.confirm``, one write: the confirm and the finish
under the confirm's condition), and one batch of confirms (:func:`confirm`, ``LeaseRequest.confirm``)
counts the attempts of the calls still in flight; each only if the run is still reserved by this
worker at the attempt seen. A confirm that is refused means the reservation was lost (it ended and
another worker took the run): that call is cut; a confirmed finish refused drops its answer, nothing
written: the run comes back when the reservation ends and is called again.

So an attempt is counted only for a call that began (invariant (a), with no exception for a worker
that dies between the two), the instant holds reads only, and a worker that dies holding runs gives
them back untouched when their reservations end. What does not qualify (overlap forbid/replace,
owners with start limits, jobs paused, changed or deleted meanwhile) is leased at the instant by
``batch.prepare`` before its call, as without reservations.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from punctual import ids, rules
from punctual.execution.batch import Holding, Leased, Port, hold
from punctual.execution.leasing import lease_length_ms, withdrawal_of
from punctual.model import Completion, Job, JobStatus, Overlap, Run, RunState
from punctual.port import Delivery, LeaseOutcome, LeaseRequest, Reservation

logger = logging.getLogger(__name__)

# The jobs' versions are read this long before the instant (``begin_reserved``), so that only the
# calls are left at the instant: 10,000 reserved runs take ~0.2 s to check and build on a loaded
# machine. It is within the second before an instant whose commits the contract does not promise (c).
BEGIN_AHEAD_MS = 500
CONFIRM_TRIES = 3  # a confirm batch that fails (a throttle) is tried again before its calls are cut
# The confirms wait this long after the calls (or a burst's quiet, if longer) for the answers: a call
# answered by then is confirmed by its finish, one write instead of two (``Done.confirm``). Well
# within the reservation's grace (rules.RESERVATION_GRACE_MS): the confirms still land before it ends.
CONFIRM_WAIT_S = 0.75
ANSWERS_POLL_S = 0.05  # how often the wait looks for the answers


def hold_and_reserve(port: Port, deliveries: Sequence[Delivery], *, instant: int) -> Holding:
    """``batch.hold``, then reserve for this worker until ``instant + RESERVATION_GRACE_MS`` every held
    run that may start as it is: its job allows overlap, its owner has no start limits, nothing
    withdraws it, and it is scheduled. ``Holding.reserved`` maps each reserved run's receipt to the
    run as reserved; the other held runs are leased at the instant (``batch.prepare``)."""
    holding = hold(port, deliveries)
    candidates: list[tuple[Delivery, Run]] = []
    for delivery in holding.deliveries:
        key = ids.parse_run_id(delivery.run_id)
        job, run = holding.jobs[key[0]], holding.runs.get(key)
        if run is not None and _may_reserve(port, job, run):
            candidates.append((delivery, run))
    if not candidates:
        return holding
    until = instant + rules.RESERVATION_GRACE_MS
    now = port.clock.now_ms()
    reserved = port.store.reserve_runs([Reservation(run, until) for _, run in candidates], port.worker_id, now)
    holding.reserved = {d.receipt: run for (d, _), run in zip(candidates, reserved, strict=True) if run is not None}
    return holding


def _may_reserve(port: Port, job: Job, run: Run) -> bool:
    limited = port.gate is not None and port.gate.limits_starts(job.owner, job)
    # a callback job's call carries its attempt's token, which names the lease: leased before its call
    return (
        run.state is RunState.SCHEDULED
        and job.completion is Completion.RESPONSE
        and job.overlap is Overlap.ALLOW
        and not limited
        and job.status is not JobStatus.DELETED
        and withdrawal_of(job, run.scheduled_at) is None
    )


@dataclass(slots=True)
class Begun:
    """What :func:`begin_reserved` decided at the instant."""

    now: int  # the instant the attempts begin at (and the confirms lease from)
    calls: list[Leased] = field(default_factory=list)  # to call now, then confirm
    seen: dict[str, Run] = field(default_factory=dict)  # receipt -> the run as reserved (for the confirm)
    rest: list[Delivery] = field(default_factory=list)  # to lease before their call (batch.prepare)


def begin_reserved(
    port: Port, reserved: Sequence[tuple[Delivery, Run]], jobs: dict[str, Job], *, at: int | None = None
) -> Begun:
    """Just before the instant ``at`` (the attempts begin at ``at``, or now if later): the reserved
    runs whose jobs are as they were read (one read of their versions) go ahead, with their attempts
    built in memory; a run whose job changed goes ahead with the job as it is now if it still may,
    else it is left to ``batch.prepare`` (``rest``): a deleted or paused job, a schedule that lost
    the instant, a job whose overlap or owner's limits now say to decide at the lease."""
    begun = Begun(now=max(port.clock.now_ms(), at or 0))
    reserved = list({delivery.receipt: (delivery, run) for delivery, run in reserved}.values())  # a receipt once
    # one delivery per run: the worker claims each run for one copy of its message (Holding._claim_starts)
    if not reserved:
        return begun
    wanted = {job_id: jobs[job_id].version for job_id in {run.job_id for _, run in reserved}}
    marks = port.store.job_marks(wanted)
    changed = [job_id for job_id, version in wanted.items() if (m := marks.get(job_id)) is None or m.version != version]
    fresh = port.store.get_jobs(changed) if changed else {}
    for delivery, run in reserved:
        job: Job | None = fresh.get(run.job_id) if run.job_id in fresh else jobs[run.job_id]
        if run.job_id in changed and run.job_id not in fresh:
            job = None
        if job is None or not _may_reserve(port, job, run):
            begun.rest.append(delivery)
            continue
        lease_ms = lease_length_ms(job, port.options)
        attempt = rules.leased(run, port.worker_id, begun.now, lease_ms)
        begun.calls.append(Leased(delivery, job, attempt, lease_ms))
        begun.seen[delivery.receipt] = run
    return begun


def confirm(port: Port, begun: Begun) -> list[bool]:
    """Count the attempts of ``begun.calls`` (their calls were written): one flag each, False where
    the reservation was lost (the caller cuts that call). A batch that keeps failing is all False:
    the calls are cut and their runs come back when the reservations end."""
    requests = [
        LeaseRequest(
            one.run.job_id, one.run.scheduled_at, one.lease_ms, seen=begun.seen[one.delivery.receipt], confirm=True
        )
        for one in begun.calls
    ]
    for attempt in range(CONFIRM_TRIES):
        try:
            results = port.store.lease_runs(requests, port.worker_id, begun.now)
        except Exception:
            if attempt == CONFIRM_TRIES - 1:
                logger.exception("could not confirm %d attempts; their calls are cut", len(requests))
                return [False] * len(requests)
            continue
        return [result.outcome is LeaseOutcome.LEASED for result in results]
    return [False] * len(requests)
