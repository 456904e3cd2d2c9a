"""Async completion (issue 33): a job whose target accepts the work (HTTP 202) and finishes it later,
reporting through the run's callback routes (``POST /runs/{id}/heartbeat`` and ``/complete``).

What a job chooses (:class:`Completion`, ``heartbeat_timeout_s``) and the bounds of what a callback
carries. The protocol is ``punctual.runs.callbacks`` (the rules), ``punctual.runs.tokens`` (the
attempt-scoped token) and ``punctual.execution.callbacks`` (the writes and what a completion owes).
"""

from __future__ import annotations

from enum import StrEnum

# heartbeat_timeout_s: at least 10 s (a reaper pass and a network round trip fit in it many times
# over), at most 12 h (as timeout_s: a run silent longer than that is lost, not slow); 5 minutes by default
MIN_HEARTBEAT_TIMEOUT_S = 10
MAX_HEARTBEAT_TIMEOUT_S = 43_200
DEFAULT_HEARTBEAT_TIMEOUT_S = 300
MAX_PROGRESS_CHARS = 256  # a heartbeat's progress note, kept on the run until the next one
ACCEPTED_STATUS = 200 + 2  # HTTP 202 Accepted: the one answer that accepts the work of a callback job


class Completion(StrEnum):
    """When an attempt of a job's run is done."""

    RESPONSE = "response"  # the target's answer finishes the attempt (2xx: succeeded): the default
    # HTTP targets only: a 202 answer accepts the work and the target reports its end to the run's
    # callback URL (heartbeats keep it alive); any other 2xx still finishes the attempt succeeded
    CALLBACK = "callback"
