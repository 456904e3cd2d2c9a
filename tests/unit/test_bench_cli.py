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


def test_the_burst_refuses_nginx_where_it_cannot_serve_the_url() -> None:
    from punctual.bench.burst import _burst_target

    for host, tls in [("localhost", False), ("127.0.0.1", True)]:
        with pytest.raises(ValueError, match=r"plain HTTP on 127\.0\.0\.1"), _burst_target("nginx", 0, host, tls):
            pass
    with pytest.raises(ValueError, match="noop, nginx or auto"), _burst_target("apache", 0, "127.0.0.1", False):
        pass


def test_the_burst_records_each_arrival_at_its_target_in_epoch_ms() -> None:
    import time
    import urllib.request

    from punctual.bench.burst import _burst_target
    from punctual.bench.webhooks import find_nginx

    kinds = ["noop", "auto"] if find_nginx() is None else ["noop", "nginx"]
    for kind in kinds:
        with _burst_target(kind, 0, "127.0.0.1", False) as target:
            assert target.arrivals_ms() == []
            sent = time.time() * 1000
            for _ in range(3):
                with urllib.request.urlopen(target.url, data=b"{}", timeout=5) as answer:
                    assert answer.status in (200, 204)
            arrived = target.finish_ms()
        assert len(arrived) == 3 and all(sent - 5 <= at <= time.time() * 1000 + 5 for at in arrived), (kind, arrived)
