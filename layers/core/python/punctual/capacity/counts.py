"""Requests and write units one run costs on the aws engine: the model's per-run counts.

These are not estimates: ``tests/integration/test_capacity_counts.py`` drives runs through the
real claim and the worker Lambda's path on the aws engine against moto, counts requests on the
wire and write units from the items before and after each write, and asserts they equal these.

Happy path of a recurring job whose items are under 1 KB:

=========  ====================================  =====================================
step       DynamoDB                              write units
=========  ====================================  =====================================
claim      UpdateItem jobs (advance)             table 1 + ``due`` key moved 2 = 3
insert     PutItem runs                          table 1 + ``open`` entry put 1 = 2
lease      UpdateItem runs                       1
finish     UpdateItem runs                       table 1 + ``open`` entry deleted 1 = 2
stats      UpdateItem leases (ADD)               1 (the per-owner minute counters of GET /stats)
=========  ====================================  =====================================

9 in all. Two deploy options drop units: without the ``open`` index (``-c open_index=false``)
insert and finish cost 1 each, and without the GET /stats counters (``-c stats_counters=false``)
the stats step costs 0: 9, 8, 7, and the design budget's 6 with both off.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WriteUnits:
    """Write units per run, per step and per table or index."""

    claim_jobs: int = 1  # the job item rewritten by the advance
    claim_due: int = 2  # its due-index key moved: delete + put
    insert_runs: int = 1
    insert_open: int = 1  # the run's entry in the sparse open index (0 without it)
    lease_runs: int = 1
    finish_runs: int = 1
    finish_open: int = 1  # the entry deleted at the terminal write (0 without it)
    finish_stats: int = 1  # GET /stats: the owner's minute counter in the leases table (0 without it)

    @property
    def by_step(self) -> dict[str, int]:
        return {
            "claim": self.claim_jobs + self.claim_due,
            "insert": self.insert_runs + self.insert_open,
            "lease": self.lease_runs,
            "finish": self.finish_runs + self.finish_open,
            "stats": self.finish_stats,
        }

    @property
    def total(self) -> int:
        return sum(self.by_step.values())


@dataclass(frozen=True, slots=True)
class PerRun:
    """What one run costs on the happy path (amortized over full batches where requests batch)."""

    writes: WriteUnits
    dynamodb_reads: float  # item reads per run (each under 4 KB, strongly consistent: 1 read unit)
    sqs_requests: float  # SQS requests per run, the worker's and the scheduler's
    sqs_detail: dict[str, float]


def per_run(*, open_index: bool = True, stats_counters: bool = True, worker: str = "lambda") -> PerRun:
    """The measured per-run counts for a deployment with or without the ``open`` index and the
    GET /stats counters (``Settings.open_index``, ``Settings.stats_counters``).

    ``worker`` is ``lambda`` (the SQS event source receives and deletes in batches of 10) or
    ``process`` (``punctual worker``, the Fargate task).
    """
    writes = WriteUnits(
        insert_open=1 if open_index else 0,
        finish_open=1 if open_index else 0,
        finish_stats=1 if stats_counters else 0,
    )
    sqs = dict(SQS_LAMBDA if worker == "lambda" else SQS_PROCESS)
    return PerRun(writes=writes, dynamodb_reads=READS_PER_RUN, sqs_requests=sum(sqs.values()), sqs_detail=sqs)


# The worker reads the run's job once to learn its target: one strongly consistent item read (1 read
# unit under 4 KB), requested for its whole batch in one BatchGetItem (0.1 requests per run at
# batches of 10, measured). The lease and the finish return the new item (ReturnValues): no reads.
READS_PER_RUN = 1.0
READ_REQUESTS_LAMBDA_WORKER = {"BatchGetItem": 0.1}

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
