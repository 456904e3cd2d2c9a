"""The minute hand-over of a scheduler Lambda instance: one invocation a minute, no gap, no overlap
in the claim window.

EventBridge starts instance ``i`` at the start of every minute (a ``cron()`` rule: second 0, plus
its delivery and the function's cold start). The runs of a minute's top are claimed in the seconds
before it (``lookahead_ms``: :55-:00 by default): that is where the load is, and where a hand-over
must not fall. So the invocation started for minute ``G`` ticks through the next minute's claim
window and hands over right after it, to the invocation for ``G + 1``::

    G:00        G+1:00 - lookahead   G+1:00 + d    G+1:40
     |== invocation G ========================|..|           (stops within renew_every_ms of the hand-over)
                     claim window  [=====]     |== invocation G+1 ==========================...
                                               the successor takes the leases over at its first tick

Each invocation's owner name carries its generation: ``scheduler-<i>@<G>`` (:func:`owner`, ``G``
the minute the event was scheduled for). The successor takes its predecessor's live leases at once
(``rules.succeeds``: a new epoch fences the predecessor out), and the predecessor, at its next lease
refresh, sees a successor and stops claiming (``ShardOwnership.handed_over``). So the two claim the
same shards for at most ``renew_every_ms`` (3 s), after the window, never in it; and a successor that
starts late leaves no gap, since its predecessor ticks on until it comes.

Should no successor come by second ``HAND_OVER_BY_S`` (40) of the next minute, the invocation
releases its leases and stops: the other instances take its shards over at their next refresh,
well before the next claim window (and give them back to the preferred instance later).
"""

from __future__ import annotations

from datetime import datetime

from punctual.rules import GENERATION

SAFETY_MS = 5_000  # stop at least this long before the function's timeout: the last tick and the log flush fit
PERIOD_MS = 60_000  # EventBridge starts every instance once a minute
HAND_OVER_BY_S = 40  # an invocation no successor relieved stops at this second of the next minute
# the scheduler Lambda's timeout (infra.constants.SCHEDULER_FUNCTION): from second 0 of its minute to
# HAND_OVER_BY_S of the next, with SAFETY_MS to spare for a start up to SAFETY_MS early or late
TIMEOUT_S = (PERIOD_MS + HAND_OVER_BY_S * 1000 + 2 * SAFETY_MS) // 1000


def generation(scheduled_at: str | None, now_ms: int) -> int:
    """The invocation's generation: the minute (since the epoch) its event was scheduled for
    (EventBridge's event ``time``, e.g. ``2026-12-01T12:34:00Z``), or, without one (a manual
    invocation), the current minute. Raises ValueError for a time that is not ISO 8601 with an offset."""
    if scheduled_at is None:
        return now_ms // PERIOD_MS
    at = datetime.fromisoformat(scheduled_at)
    if at.tzinfo is None:
        raise ValueError(f"time {scheduled_at!r} has no offset (EventBridge's event time is UTC, ending in Z)")
    return int(at.timestamp() * 1000) // PERIOD_MS


def owner(instance: int, generation_: int) -> str:
    """The shard-lease owner of instance ``instance``'s invocation of generation ``generation_``."""
    return f"scheduler-{instance}{GENERATION}{generation_}"


def run_until_ms(now_ms: int, remaining_ms: int, generation_: int) -> int:
    """When an invocation of ``generation_`` started at ``now_ms``, with ``remaining_ms`` before its
    timeout, stops ticking at the latest (it stops earlier once its successor took over)."""
    hand_over_by = (generation_ + 1) * PERIOD_MS + HAND_OVER_BY_S * 1000
    return min(now_ms + max(0, remaining_ms - SAFETY_MS), hand_over_by)
