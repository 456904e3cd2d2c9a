"""``punctual bench priority``, small: the ordering property, not the times (docs/api.md, Priority).

One owner at max_concurrency 5 with 150 runs of priority 5 and 6 of priority 9, created last, all
due at one second, executed by a real ``punctual worker`` process on the embedded engine: every
priority-9 run starts before the 10th percentile of the others. The bench stops as soon as that is
decided (``until_decided``), not when the backlog has drained.
"""

from __future__ import annotations

import pytest

from punctual.bench.priority import bench_priority

pytestmark = pytest.mark.e2e


def test_urgent_runs_start_before_the_backlogs_tenth_percentile() -> None:
    figures = bench_priority(150, 6, limit=5, delay_ms=20, timeout_s=60, until_decided=True, lookahead_ms=1_000)
    assert figures["high_started"] == 6, figures
    assert figures["high_all_before_low_p10"], figures
