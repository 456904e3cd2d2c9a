"""Names checked recently (``targets.resolutions``): kept for their TTL, bounded, allowed answers only."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from punctual.execution.targets import http
from punctual.execution.targets.policy import TargetPolicy
from punctual.execution.targets.resolutions import Resolutions

pytestmark = pytest.mark.unit

LOCAL = TargetPolicy(allow_loopback=True)
STRICT = TargetPolicy()


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every getaddrinfo of a name; names ending in .local answer 127.0.0.1, others 10.0.0.1."""
    seen: list[str] = []

    def fake(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        seen.append(host)
        address = "127.0.0.1" if host.endswith(".local") else "10.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return seen


def test_an_allowed_answer_is_kept_for_its_ttl_then_asked_again(lookups: list[str]) -> None:
    now = [0.0]
    cache = Resolutions(ttl_s=10, now=lambda: now[0])
    assert http.resolve("hook.local", 80, LOCAL, cache=cache) == "127.0.0.1"
    now[0] = 9.99
    assert http.resolve("hook.local", 80, LOCAL, cache=cache) == "127.0.0.1"
    assert lookups == ["hook.local"]
    now[0] = 10.0
    assert cache.get("hook.local", 80, LOCAL) is None
    http.resolve("hook.local", 80, LOCAL, cache=cache)
    assert lookups == ["hook.local", "hook.local"]


def test_a_verdict_is_kept_per_policy_and_port(lookups: list[str]) -> None:
    cache = Resolutions()
    http.resolve("hook.local", 80, LOCAL, cache=cache)
    # the same name under a stricter policy is judged again, and refused: loopback is not allowed there
    with pytest.raises(http.Refused):
        http.resolve("hook.local", 80, STRICT, cache=cache)
    http.resolve("hook.local", 443, LOCAL, cache=cache)
    assert lookups == ["hook.local"] * 3
    assert cache.get("hook.local", 80, STRICT) is None


def test_refusals_and_failures_are_not_kept(lookups: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    cache = Resolutions()
    for _ in range(2):
        with pytest.raises(http.Refused):
            http.resolve("intranet.example", 80, STRICT, cache=cache)
    assert lookups == ["intranet.example"] * 2

    def failing(*args: Any, **kwargs: Any) -> list[Any]:
        raise socket.gaierror("temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", failing)
    for _ in range(2):
        with pytest.raises(OSError, match="temporary failure"):
            http.resolve("hook.local", 80, LOCAL, cache=cache)
    assert cache.get("hook.local", 80, LOCAL) is None


def test_literal_addresses_and_refused_names_never_reach_the_cache(lookups: list[str]) -> None:
    cache = Resolutions()
    assert http.resolve("127.0.0.1", 80, LOCAL, cache=cache) == "127.0.0.1"
    with pytest.raises(http.Refused):
        http.resolve("metadata.google.internal", 80, LOCAL, cache=cache)
    assert lookups == [] and cache.get("127.0.0.1", 80, LOCAL) is None


def test_the_cache_is_bounded_expired_names_first() -> None:
    now = [0.0]
    cache = Resolutions(ttl_s=10, max_names=3, now=lambda: now[0])
    cache.put("old.local", 80, LOCAL, "127.0.0.1")
    now[0] = 5.0
    cache.put("a.local", 80, LOCAL, "127.0.0.2")
    cache.put("b.local", 80, LOCAL, "127.0.0.3")
    now[0] = 11.0  # old.local expired: it makes room, the fresh ones stay
    cache.put("c.local", 80, LOCAL, "127.0.0.4")
    assert [cache.get(name, 80, LOCAL) for name in ("a.local", "b.local", "c.local")] == [
        "127.0.0.2",
        "127.0.0.3",
        "127.0.0.4",
    ]
    cache.put("d.local", 80, LOCAL, "127.0.0.5")  # full of fresh names: all go, the newest stays
    assert cache.get("a.local", 80, LOCAL) is None and cache.get("d.local", 80, LOCAL) == "127.0.0.5"
