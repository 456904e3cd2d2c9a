"""The reaper's part of async completion: an accepted attempt whose deadline passed (no heartbeat
within the job's ``heartbeat_timeout_s``, or its ``deadline_s``) is timed out, and its run retried or
buried by the job's retry policy, through the same end as a callback's completion
(``punctual.execution.callbacks.Ending``): a ``timeout`` entry in its log, its slots freed, a retry's
message sent, what a terminal run owes settled. A ``deadline_s`` that passed is final (the run ends
``failed``): another attempt could only end past it too.

Where they are found: the embedded engine keeps an index of accepted runs by deadline
(``Store.expired_acceptances``), which the long-running reaper reads every
``acceptance_interval_s`` (2 s): an attempt times out within its heartbeat timeout and a few seconds.
The aws engine keeps none (an index write on every accepted run, and the reaper Lambda runs once a
minute anyway): there the reaper's pass finds them among the open runs past their deadline, as it
finds expired leases (``Store.past_deadline_runs``), within a pass of their deadline plus its grace.
Every timeout is a compare-and-set on the run as read: a heartbeat or a completion that lands first
wins, and the timeout is left undone.
"""

from __future__ import annotations

import logging

from punctual.errors import ConcurrentModification
from punctual.execution.callbacks import Ending
from punctual.model import Job, Run, RunState
from punctual.runs import callbacks, retry
from punctual.runs.cancel import cancellation, live_job

logger = logging.getLogger(__name__)

BATCH = 500  # accepted runs timed out per read at most


def time_out(ending: Ending, job: Job, run: Run, now: int) -> Run:
    """Time out ``run``'s accepted attempt (as read) at ``now``: retried or buried by the retry
    policy, or failed for good past ``deadline_s``. Raises :class:`ConcurrentModification` if the run
    moved on since it was read (a heartbeat or a completion came first)."""
    final = callbacks.out_of_time(job, run, now)
    verdict = retry.verdict(ok=False, retryable=not final, attempt=run.attempt, max_retries=job.max_retries)
    record = callbacks.timeout_record(job, run, now)
    return ending.end(job, run, verdict, record, now, ending.store.transition_run)


def time_out_expired(ending: Ending, now: int, *, limit: int = BATCH) -> int | None:
    """Time out every accepted run whose deadline is before ``now`` (``Store.expired_acceptances``);
    their runs of deleted jobs are cancelled. How many were ended here (None: the engine keeps no
    index of them, and the reaper's past-deadline pass finds them). A run that cannot be handled is
    logged and left for the next round."""
    store = ending.store
    expired = store.expired_acceptances(now, limit)
    if expired is None:
        return None
    ended = 0
    jobs: dict[str, Job | None] = {}
    for run in expired:
        if run.state is not RunState.ACCEPTED:
            continue
        try:
            if run.job_id not in jobs:
                jobs[run.job_id] = live_job(store, run.job_id)
            job = jobs[run.job_id]
            if job is None:
                store.transition_run(run, cancellation(now, "job deleted"))
            else:
                time_out(ending, job, run, now)
            ended += 1
        except ConcurrentModification:
            continue
        except Exception:  # one bad run must not keep the others from their timeout
            logger.exception("timing out accepted run %s failed; it is retried on the next round", run.run_id)
    return ended
