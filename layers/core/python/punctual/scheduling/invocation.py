"""How long one scheduler Lambda invocation ticks: consecutive invocations overlap, never gap.

EventBridge starts each scheduler instance once a minute, sometimes a few seconds late. An
invocation that stopped after 59 s would leave its instance's shards unscanned from its stop
until the next invocation's first tick; its leases (kept for the next invocation, not released)
also stop the other instances from taking the shards over meanwhile. So every invocation ticks
until ``SAFETY_MS`` before its own timeout, and the next one takes the leases over at its first
tick (same owner name ``scheduler-<i>``: an acquire of one's own live lease is a renewal)::

    invocation n    |==== ticks ==================================|  stops at timeout - SAFETY
    invocation n+1                            |== first tick takes the leases ==== ...
                    0 s                       60 s (+ late start)  timeout - SAFETY = 70 s

For ``overlap_ms(timeout_s)`` (10 s with the 75 s timeout) both invocations scan the same
shards; the claim's conditional writes keep that harmless (a few ``ClaimConflicts``), and a
start up to that late loses no tick. Each instance therefore needs two concurrent executions
(the stack reserves 2 per instance).
"""

from __future__ import annotations

SAFETY_MS = 5_000  # stop this long before the function's timeout: the last tick and the log flush fit
PERIOD_MS = 60_000  # EventBridge starts every instance once a minute
TIMEOUT_S = 75  # the scheduler Lambda's timeout (infra.constants.SCHEDULER_FUNCTION): 10 s of overlap


def run_until_ms(now_ms: int, remaining_ms: int) -> int:
    """When an invocation started at ``now_ms`` with ``remaining_ms`` left before its timeout stops ticking."""
    return now_ms + max(0, remaining_ms - SAFETY_MS)


def overlap_ms(timeout_s: int) -> int:
    """How long consecutive invocations of one instance both tick: how late a start may be without a gap."""
    return timeout_s * 1000 - SAFETY_MS - PERIOD_MS
