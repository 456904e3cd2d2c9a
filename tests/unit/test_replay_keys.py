"""What a replay's Idempotency-Key compares (``punctual.jobs.replay_keys.fingerprint``): the request as
meant, whatever the order or repetition of its lists; any other range, state or job is another request."""

from __future__ import annotations

from punctual.jobs.replay import ReplayQuery
from punctual.jobs.replay_keys import fingerprint
from punctual.model import RunState

DEAD, FAILED = RunState.DEAD, RunState.FAILED


def test_the_same_request_in_another_order_has_the_same_fingerprint_and_any_change_another() -> None:
    asked = fingerprint(ReplayQuery(1_000, 2_000, frozenset({DEAD, FAILED}), ("job_b", "job_a")))
    assert fingerprint(ReplayQuery(1_000, 2_000, frozenset({FAILED, DEAD}), ("job_a", "job_b", "job_a"))) == asked
    others = [
        ReplayQuery(1_001, 2_000, frozenset({DEAD, FAILED}), ("job_a", "job_b")),
        ReplayQuery(1_000, 2_001, frozenset({DEAD, FAILED}), ("job_a", "job_b")),
        ReplayQuery(1_000, 2_000, frozenset({DEAD}), ("job_a", "job_b")),
        ReplayQuery(1_000, 2_000, frozenset({DEAD, FAILED}), ("job_a",)),
        ReplayQuery(1_000, 2_000, frozenset({DEAD, FAILED}), None),  # every job is not these two
    ]
    assert len({asked, *(fingerprint(q) for q in others)}) == 1 + len(others)
