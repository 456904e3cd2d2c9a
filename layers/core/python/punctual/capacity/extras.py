"""What retries and tenant waits add to a run, at a stated rate.

The per-run counts (``punctual.capacity.counts``) are a run's happy path: one attempt, which
succeeds. Some attempts fail and are retried, and some runs of owners with limits wait for them:

- a **retry** (``retry_rate`` of runs, one more attempt each) leases the run again and finishes
  the attempt again (the lease and finish units on ``runs``), hides its message until the backoff
  ends (one ChangeMessageVisibility) and is received again (a tenth of a receive), and calls the
  target again (one more request out, one more run's worker CPU);
- a **tenant wait** (``tenant_wait_rate`` of runs) writes its owner's rate record (one unit on
  ``leases``: ``punctual.engines.aws.tenants``), hides its message until its turn and is received
  again (the same SQS requests as a retry).

Longer backoffs re-send or park the message instead of hiding it (``punctual.execution.waits``):
two requests instead of one, a difference the rates here do not resolve.
"""

from __future__ import annotations

from dataclasses import dataclass

from punctual.capacity.constants import value
from punctual.capacity.counts import PerRun

REQUESTS_PER_WAIT = 1.0 + 0.1  # hide the message (ChangeMessageVisibility), receive it again (batches of 10)


@dataclass(frozen=True, slots=True)
class Extras:
    retry_rate: float
    tenant_wait_rate: float
    runs_write_units: float  # per run, on the runs table
    leases_write_units: float  # per run, on the leases table (rate records)
    sqs_requests: float  # per run
    attempts: float  # target calls per run (1 + the retries)

    def to_dict(self) -> dict[str, float]:
        return {
            "retry_rate": self.retry_rate,
            "tenant_wait_rate": self.tenant_wait_rate,
            "runs_write_units": round(self.runs_write_units, 4),
            "leases_write_units": round(self.leases_write_units, 4),
            "sqs_requests": round(self.sqs_requests, 4),
            "attempts": round(self.attempts, 4),
        }


def extras(counts: PerRun) -> Extras:
    retry, wait = value("retry_rate"), value("tenant_wait_rate")
    w = counts.writes
    return Extras(
        retry_rate=retry,
        tenant_wait_rate=wait,
        # a retry is leased when its backoff ends, never reserved ahead (pre-leasing or not): 1 unit
        runs_write_units=retry * (1 + w.finish_runs),
        leases_write_units=wait * 1.0,
        sqs_requests=(retry + wait) * REQUESTS_PER_WAIT,
        attempts=1.0 + retry,
    )
