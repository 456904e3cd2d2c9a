"""`punctual bench core`: the claim rounds it reports (speed itself is measured, not tested)."""

from __future__ import annotations

from typing import Any

import pytest

from punctual.bench import core

pytestmark = pytest.mark.unit


def test_sizes_are_claimed_in_alternating_rounds_a_large_one_on_one_file(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a small size and one above the fresh-file limit (lowered here: 10M takes minutes to load)
    monkeypatch.setattr(core, "ROUNDS_UP_TO", 1_000)
    order: list[tuple[int, int]] = []
    real_claim = core._LoadedFile.claim

    def claim(self: core._LoadedFile, n: int, page: int) -> dict[str, Any]:
        figures = real_claim(self, n, page)
        order.append((self.stored, figures["runs_claimed"]))
        return figures

    monkeypatch.setattr(core._LoadedFile, "claim", claim)
    small, large = core.bench_sizes([300, 3_000], due=600, page=100)
    # Then the rounds alternate between the sizes, and every round claims every due job exactly
    # once (on the large file, the jobs the round before advanced are due again a minute later)
    assert order == [(300, 300), (3_000, 600)] * core.ROUNDS
    # And each size reports its median round, with its reads
    assert (small["stored_jobs"], small["due_jobs"], small["runs_claimed"]) == (300, 300, 300)
    assert (large["stored_jobs"], large["due_jobs"], large["runs_claimed"]) == (3_000, 600, 600)
    for figures in (small, large):
        assert figures["claim_rounds"] == core.ROUNDS == len(figures["claims_per_second_rounds"])
        assert sorted(figures["claims_per_second_rounds"])[1] == figures["claims_per_second"]  # the median
        assert figures["writeback_seconds"] >= 0 and figures["claims_per_second"] > 0
        assert figures["history_runs"] == core.HISTORY_RUNS and "list_jobs_page_ms" in figures
