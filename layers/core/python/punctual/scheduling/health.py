"""Whether a scheduler is working: each tick's outcome, failures in a row, and when to give up.

The scheduler loop survives a failed tick (throttling, a network blip): the claim is safe to
repeat, so the next tick retries. A failure that never ends must not stay inside the loop,
though. A DynamoDB AccessDenied, a broken queue policy or throttling that does not stop would
otherwise stop every run while the process looks healthy. So every tick is judged here. The loop
reports the result as metrics (``punctual.metrics``: ``SchedulerTickFailures``,
``SchedulerFailedTicksInARow``), and it gives up by raising :class:`SchedulerFailing`:

- after ``give_up_after`` ticks in a row in which *nothing* succeeded (:attr:`TickOutcome.FAILED`).
  Giving up then costs nothing, because no shard was being claimed. A tick in which some shards
  failed and others were claimed (:attr:`TickOutcome.PARTIAL`) is counted and alarmed on, but it
  never makes the loop give up: that would stop the healthy shards too;
- when a loop with a deadline (the Lambda invocation) ends without one tick that succeeded even
  in part: at the deadline, or relieved by its successor (the minute's hand-over,
  ``punctual.scheduling.invocation``), which usually comes first. Ticks that each take seconds to
  fail (connect timeouts, throttling retried inside botocore) may never reach ``give_up_after``
  within one invocation. The hand-over itself is a normal stop: the tick that finds the successor
  is not judged at all.

On Lambda the exception fails the invocation, so the function's ``Errors`` metric counts it. The
``punctual scheduler`` process exits with status 1, so a supervisor restarts it and shows the
restarts.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from punctual.errors import PunctualError
from punctual.scheduling.claim import ClaimStats


class SchedulerFailing(PunctualError):
    """The scheduler gave up: its recent ticks claimed nothing because every attempt failed."""

    code = "scheduler_failing"


class TickOutcome(StrEnum):
    """What one tick achieved."""

    # Every owned shard was read and claimed, or the instance owns no shard.
    OK = "ok"
    # Some shards' claims failed and others succeeded. The failed shards wait for the next tick.
    PARTIAL = "partial"
    # Nothing succeeded. Either the shard leases could not be refreshed, or every claim failed.
    FAILED = "failed"

    @classmethod
    def of(cls, stats: ClaimStats) -> TickOutcome:
        """The outcome of a tick that returned ``stats`` (a tick that raised is ``FAILED``)."""
        if not stats.failed:
            return cls.OK
        return cls.PARTIAL if stats.pages else cls.FAILED


@dataclass(slots=True)
class TickHealth:
    """Counts one scheduler loop's ticks. ``give_up_after`` = 0 means never give up."""

    give_up_after: int
    failed_in_a_row: int = 0  # ticks in a row that were not OK (PARTIAL or FAILED); the alarm's gauge
    nothing_in_a_row: int = 0  # ticks in a row that were FAILED (nothing succeeded)
    succeeded: int = 0  # ticks of this loop that achieved something (OK or PARTIAL)
    ticks: int = 0

    def record(self, outcome: TickOutcome) -> None:
        self.ticks += 1
        self.failed_in_a_row = 0 if outcome is TickOutcome.OK else self.failed_in_a_row + 1
        self.nothing_in_a_row = self.nothing_in_a_row + 1 if outcome is TickOutcome.FAILED else 0
        if outcome is not TickOutcome.FAILED:
            self.succeeded += 1

    @property
    def exhausted(self) -> bool:
        """True once ``give_up_after`` ticks in a row achieved nothing."""
        return 0 < self.give_up_after <= self.nothing_in_a_row

    @property
    def never_succeeded(self) -> bool:
        """True if this loop ticked and no tick achieved anything (checked when a loop with a deadline ends)."""
        return self.ticks > 0 and self.succeeded == 0

    def failing(self, reason: str) -> SchedulerFailing:
        return SchedulerFailing(
            f"scheduler gave up: {reason} ({self.nothing_in_a_row} ticks in a row claimed nothing, "
            f"{self.ticks - self.succeeded} of {self.ticks} ticks failed entirely)"
        )
