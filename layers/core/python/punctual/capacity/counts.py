"""Requests, write units and read units one run costs on the aws engine: the model's per-run counts.

These are not estimates: ``tests/integration/test_capacity_counts.py`` drives runs of the
*reference job* below through the real claim and the worker Lambda's path on the aws engine against
moto, counts requests on the wire and computes write and read units from the sizes of the items
written and read (DynamoDB's rules: attribute names plus values, whole KB per write, whole 4 KB per
read), and asserts they equal these.

Happy path of a recurring job (the reference job: a 1 KB payload, 4 KB of headers, a 512-character
response excerpt). Every write is under 1 KB: the claim rewrites only the job's head, never its
spec (``punctual.engines.aws.job_items``), and a finish cuts the excerpt where the run's record
would pass 1 KB (``punctual.execution.changes.fit_record``):

=========  ====================================  =====================================
step       DynamoDB                              write units
=========  ====================================  =====================================
claim      UpdateItem jobs (advance the head)    table 1 + ``due`` key moved 2 = 3
insert     PutItem runs                          table 1 + ``open`` entry put 1 = 2
lease      UpdateItem runs                       1
finish     UpdateItem runs                       table 1 + ``open`` entry deleted 1 = 2
stats      UpdateItem leases (ADD)               1 (the per-owner minute counters of GET /stats)
=========  ====================================  =====================================

A pre-leasing worker (the Fargate tier) writes the lease step as a reservation before the instant
(``execution.reserving``), and confirms the attempt in its finish's write when the call answered
within ``CONFIRM_WAIT_S`` of the instant (``Finish.confirm``): 1 unit for the lease step, and 1 more
for a call still in flight then, confirmed by a write of its own (:func:`late_confirm_share` of the
calls: 0.22 for targets answering in 500 ms on average).

With a claim window, a job's window runs go without their own ``open`` entries: one marker item
stands for them in the index (``punctual.engines.aws.windows``: put at the claim, 1 unit and 1 for
its entry; closed by the reaper once its runs have ended, 1 and 1): 0.2 a run at insert and 0.2 at
the end for 10 runs a window, instead of 1 and 1.

9 in all. With a claim window (``Settings.claim_window_s``, ``punctual.scheduling.planning``) one
claim takes a job's times up to its window boundary: the claim's 3 units are paid once per
``claim_runs`` runs (10 for a minute job and the plan's 600 s window: 0.3 a run; with the
markers, 4.7 in all).
Two deploy options drop units: without the ``open`` index (``-c open_index=false``)
insert and finish cost 1 each, and without the GET /stats counters (``-c stats_counters=false``)
the stats step costs 0: 9, 8, 7, and the design budget's 6 with both off. They do not grow with the
payload or the headers (up to ``MAX_JOB_BYTES``): only the worker's read of the spec does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WriteUnits:
    """Write units per run, per step and per table or index."""

    claim_jobs: int = 1  # the job's head rewritten by the advance (under 1 KB; its spec is not written)
    claim_due: int = 2  # its due-index key moved: delete + put
    claim_runs: int = 1  # runs one claim takes (a claim window's times; 1 without one): the claim's share
    insert_runs: int = 1
    insert_open: int = 1  # the run's entry in the sparse open index (0 without it)
    # the lease at the instant; a pre-leasing worker's confirm of its reservation is merged into the
    # finish when the call answered before the confirms went out (Finish.confirm): 0 there
    lease_runs: int = 1
    # a pre-leasing worker (the Fargate tier) first reserves the run for its instant (execution.reserving,
    # decision 0150), and its call's finish confirms it (one write for the confirm and the finish): the
    # lease step costs 1 either way (2, reserve and confirm, for a call still in flight at the confirms)
    reserve_runs: int = 0
    # the share of pre-leased calls still in flight at the confirms: each confirmed by a write of its
    # own, 1 unit more (:func:`late_confirm_share`)
    late_confirms: float = 0.0
    finish_runs: int = 1
    finish_open: int = 1  # the entry deleted at the terminal write (0 without it)
    finish_stats: int = 1  # GET /stats: the owner's minute counter in the leases table (0 without it)

    @property
    def claim_jobs_per_run(self) -> float:
        return self.claim_jobs / self.claim_runs

    @property
    def claim_due_per_run(self) -> float:
        return self.claim_due / self.claim_runs

    @property
    def lease_per_run(self) -> float:
        """Runs-table writes of the lease step: the lease, or the reservation and the late confirms."""
        return round(self.lease_runs + self.reserve_runs + self.late_confirms, 4)

    @property
    def marked(self) -> bool:
        """A claim window's runs share one ``open`` entry, on a marker (``engines.aws.windows``)."""
        return self.claim_runs > 1 and self.insert_open > 0

    @property
    def insert_open_per_run(self) -> float:
        """``open`` index writes at insert: the run's entry, or its window marker's share (a put)."""
        return 1 / self.claim_runs if self.marked else self.insert_open

    @property
    def finish_open_per_run(self) -> float:
        """``open`` index writes at the end: the run's entry deleted, or its marker's share (closed)."""
        return 1 / self.claim_runs if self.marked else self.finish_open

    @property
    def marker_per_run(self) -> float:
        """Runs-table writes of the window marker, per run and per step: its put, and its close."""
        return 1 / self.claim_runs if self.marked else 0.0

    @property
    def by_step(self) -> dict[str, float]:
        return {
            "claim": round((self.claim_jobs + self.claim_due) / self.claim_runs, 4),
            "insert": round(self.insert_runs + self.marker_per_run + self.insert_open_per_run, 4),
            "lease": self.lease_per_run,
            "finish": round(self.finish_runs + self.marker_per_run + self.finish_open_per_run, 4),
            "stats": self.finish_stats,
        }

    @property
    def total(self) -> float:
        return round(sum(self.by_step.values()), 4)


@dataclass(frozen=True, slots=True)
class PerRun:
    """What one run costs on the happy path (amortized over full batches where requests batch)."""

    writes: WriteUnits
    dynamodb_reads: float  # read units per run: the worker's reads of the run's job (READS_PER_RUN)
    # read units per run of the reaper's one look at a claim window (runs table): the run and its
    # marker's share, read strongly consistent once the window's last time is a reaper age old
    reaper_reads: float
    sqs_requests: float  # SQS requests per run, the worker's and the scheduler's
    sqs_detail: dict[str, float]


def per_run(
    *,
    open_index: bool = True,
    stats_counters: bool = True,
    worker: str = "lambda",
    claim_runs: int = 1,
    prelease: bool = False,
    target_duration_ms: int | None = None,
) -> PerRun:
    """The measured per-run counts for a deployment with or without the ``open`` index and the
    GET /stats counters (``Settings.open_index``, ``Settings.stats_counters``), whose claims take
    ``claim_runs`` runs each (a claim window's times of a job: :func:`claim_runs_of`), its workers
    pre-leasing (``prelease``: a reservation before the instant, confirmed by the finish of a call
    answered within ``execution.reserving.CONFIRM_WAIT_S``) or not: the share of calls answered
    later, for targets answering in ``target_duration_ms`` on average, pays its own confirm.

    ``worker`` is ``lambda`` (the SQS event source receives and deletes in batches of 10) or
    ``process`` (``punctual worker``, the Fargate task).
    """
    writes = WriteUnits(
        insert_open=1 if open_index else 0,
        finish_open=1 if open_index else 0,
        finish_stats=1 if stats_counters else 0,
        claim_runs=claim_runs,
        lease_runs=0 if prelease else 1,
        reserve_runs=1 if prelease else 0,
        late_confirms=late_confirm_share(target_duration_ms) if prelease and target_duration_ms else 0.0,
    )
    sqs = dict(SQS_LAMBDA if worker == "lambda" else SQS_PROCESS)
    reaper = 1 + 1 / claim_runs if writes.marked else 0.0
    return PerRun(
        writes=writes, dynamodb_reads=READS_PER_RUN, reaper_reads=reaper, sqs_requests=sum(sqs.values()), sqs_detail=sqs
    )


# How long a pre-leasing worker waits after its calls for their answers before it confirms the
# calls still in flight (execution.reserving.CONFIRM_WAIT_S, in ms; tests/unit/test_capacity.py
# keeps the two equal: capacity does not import the worker).
CONFIRM_WAIT_MS = 750


def late_confirm_share(target_duration_ms: int) -> float:
    """The share of pre-leased calls not answered within :data:`CONFIRM_WAIT_MS`, for targets that
    answer in ``target_duration_ms`` on average: call durations taken as exponentially distributed
    (a long tail; a webhook's are usually tighter, so this overstates), ``exp(-wait / mean)``."""
    return round(math.exp(-CONFIRM_WAIT_MS / target_duration_ms), 4)


# The claim window the plan deploys for jobs that fire at least twice in it (Settings.claim_window_s):
# 10 minutes, 10 runs of a minute job per claim. Its bound (780 s) leaves room for the longest
# lookahead and pre-lease in one SQS delay; 600 s keeps a margin for jitter.
CLAIM_WINDOW_S = 600


def claim_window_for(interval_s: int) -> int:
    """The claim window for jobs firing every ``interval_s``: :data:`CLAIM_WINDOW_S` if they fire at
    least twice in it, else 0 (one time per claim: a window would change nothing)."""
    return CLAIM_WINDOW_S if 2 * interval_s <= CLAIM_WINDOW_S else 0


def claim_runs_of(window_s: int, interval_s: int) -> int:
    """Runs one claim takes on average for jobs firing every ``interval_s`` with a claim window of
    ``window_s``: each job claims once per window (its boundary), its times in the window."""
    return max(1, window_s // interval_s)


# The reference job of these counts (tests/integration/test_capacity_counts.py builds it).
REFERENCE_PAYLOAD_BYTES = 1024
REFERENCE_HEADER_BYTES = 4096
REFERENCE_EXCERPT_CHARS = 512

# The worker reads the run's job once, for its whole batch: the heads in one strongly consistent
# BatchGetItem (1 read unit each: a head is under 1 KB) and the specs in one eventually consistent
# BatchGetItem (0.5 per 4 KB: the reference job's spec is 5.3 KB, 1.0), checked against the head's
# spec_version. 0.2 requests per run at batches of 10, measured. The lease and the finish return
# the new item (ReturnValues): no reads. A spec of up to 4 KB reads 1.5 units, up to 8 KB 2.0, up to
# MAX_JOB_BYTES 2.5: docs/capacity.md, "Per-run counts".
READS_PER_RUN = 2.0
READ_REQUESTS_LAMBDA_WORKER = {"BatchGetItem": 0.2}

# SQS requests per run, at full batches of 10:
# - the scheduler sends in batches (measured);
# - the worker Lambda sets its batch's visibility to the leases, one batch request (measured);
# - the Lambda event source receives and deletes in batches: AWS's requests, billed to the account
#   (the receive is measured by receiving as it does; the batch delete is documented behaviour).
SQS_SCHEDULER = {"SendMessageBatch": 0.1}
SQS_LAMBDA_WORKER = {"ChangeMessageVisibilityBatch": 0.1}
SQS_EVENT_SOURCE = {"ReceiveMessage": 0.1, "DeleteMessageBatch": 0.1}
SQS_LAMBDA = SQS_SCHEDULER | SQS_LAMBDA_WORKER | SQS_EVENT_SOURCE
# The long-running worker (punctual worker, the Fargate task), as tests/integration/test_wire_counts.py
# counts it on a moto server (200 runs: receives of up to 10 in long polls, batched deletes); the
# receives vary with timing, so that test checks its measurement against these within a tolerance.
SQS_PROCESS_WORKER = {"ReceiveMessage": 0.155, "DeleteMessageBatch": 0.105}
SQS_PROCESS = SQS_SCHEDULER | SQS_PROCESS_WORKER
