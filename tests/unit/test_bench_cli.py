"""`punctual bench burst --repeat N`: the medians it prints next to each run's figures."""

from __future__ import annotations

import pytest

from punctual.cli.bench import _medians

pytestmark = pytest.mark.unit


def test_medians_are_taken_per_burst_size_over_the_numeric_figures() -> None:
    runs = [
        {"jobs": 20_000, "start_lateness_ms_p99": p99, "runs_completed_per_second": rate, "note": "x"}
        for p99, rate in [(900, 13_000), (3_000, 6_000), (1_500, 9_500)]
    ]
    runs.append({"jobs": 1_000, "start_lateness_ms_p99": 10, "runs_completed_per_second": None, "note": "y"})
    [big, small] = _medians(runs)
    assert big == {"jobs": 20_000, "runs": 3, "start_lateness_ms_p99": 1_500, "runs_completed_per_second": 9_500}
    assert small == {"jobs": 1_000, "runs": 1, "start_lateness_ms_p99": 10}


def test_the_no_op_target_can_be_named_so_that_attempts_resolve_it() -> None:
    import urllib.request

    from punctual.bench.target import noop_target

    with noop_target(0, "localhost") as url:
        assert url.startswith("http://localhost:") and url.endswith("/noop")
        with urllib.request.urlopen(url, data=b"{}", timeout=5) as answer:
            assert answer.status == 204  # no content: what the no-op target answers


def test_the_no_op_target_serves_https_with_a_certificate_only_its_ca_verifies() -> None:
    import ssl
    import urllib.error
    import urllib.request

    from punctual.bench.target import noop_target_process

    with noop_target_process(0, "localhost", tls=True) as target:
        url = target.url
        assert url.startswith("https://localhost:") and target.ca is not None
        trusting = ssl.create_default_context(cafile=str(target.ca))
        with urllib.request.urlopen(url, data=b"{}", timeout=5, context=trusting) as answer:
            assert answer.status == 204
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(url, data=b"{}", timeout=5, context=ssl.create_default_context())
