"""Regression (issue 10, item 6): IPv6 forms that carry an IPv4 address passed the SSRF guard,
at job creation and in the worker, so ``64:ff9b::a9fe:a9fe`` (NAT64) reached 169.254.169.254.
With ``allow_private``, fd00:ec2::/32 (EC2's metadata and agent addresses) was open too.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from typing import Any

import pytest

from punctual.execution.targets import Invocation, TargetPolicy, TargetRefused, check_target, http
from punctual.execution.targets.policy import address_refusal, embedded_ipv4
from punctual.model import HttpTarget
from tests.regressions.conftest import OWNER, Api

EVERYTHING = TargetPolicy(allow_private=True, allow_loopback=True)
STRICT = TargetPolicy()
METADATA_FORMS = [
    "64:ff9b::a9fe:a9fe",  # NAT64, well-known prefix
    "64:ff9b:1:a9fe:a9:fe00::",  # local-use NAT64 (/48 layout: the u octet is skipped)
    "64:ff9b:1::a9fe:a9fe",  # local-use NAT64, /96 layout
    "::a9fe:a9fe",  # IPv4-compatible
    "::ffff:0:a9fe:a9fe",  # IPv4-translated
    "2002:a9fe:a9fe::",  # 6to4
    "2001:0:4136:e378:8000:63bf:5601:5601",  # Teredo, client 169.254.169.254 (obfuscated)
    "fd00:ec2::254",  # EC2 metadata over IPv6
    "fd00:ec2::23",  # another EC2 address (the Amazon Time Sync service)
]


@pytest.mark.unit
@pytest.mark.parametrize("form", METADATA_FORMS)
def test_metadata_inside_ipv6_is_refused_at_creation_whatever_the_policy(form: str) -> None:
    with pytest.raises(TargetRefused):
        check_target(HttpTarget(url=f"http://[{form}]/latest/meta-data/"), EVERYTHING)


@pytest.mark.unit
@pytest.mark.parametrize("form", METADATA_FORMS)
def test_metadata_inside_ipv6_is_refused_by_the_worker_after_resolution(
    form: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def resolves_to_form(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (form, port, 0, 0))]

    monkeypatch.setattr(socket, "getaddrinfo", resolves_to_form)
    invocation = Invocation("run_x", "job_x", 0, 1, None)
    result = http.send(HttpTarget(url="http://innocent.example/"), invocation, EVERYTHING, time.monotonic() + 5)
    assert not result.ok and not result.retryable
    assert "refused by the target policy" in (result.error or "")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("address", "policy", "refused"),
    [
        ("64:ff9b::808:808", STRICT, False),  # NAT64 to a public address is a public address
        ("64:ff9b::a00:1", STRICT, True),  # NAT64 to 10.0.0.1
        ("64:ff9b::a00:1", TargetPolicy(allow_private=True), False),
        ("::ffff:0:7f00:1", STRICT, True),  # translated loopback
        ("::7f00:1", TargetPolicy(allow_loopback=True), False),
        ("2002:808:808::1", STRICT, False),  # 6to4 of a public address
        ("2002:c0a8:101::1", STRICT, True),  # 6to4 of 192.168.1.1
        ("64:ff9b:1::808:808", STRICT, True),  # local-use NAT64 is not global
        ("::1", TargetPolicy(allow_loopback=True), False),  # IPv6 loopback is not "IPv4 0.0.0.1"
        ("fd00:ec3::1", TargetPolicy(allow_private=True), False),  # the rest of fc00::/7 stays private
    ],
)
def test_ipv6_forms_are_judged_by_the_ipv4_address_they_carry(
    address: str, policy: TargetPolicy, refused: bool
) -> None:
    assert (address_refusal(ipaddress.ip_address(address), policy) is not None) is refused


@pytest.mark.unit
def test_every_layout_of_the_local_use_nat64_prefix_is_unwrapped() -> None:
    carried = embedded_ipv4(ipaddress.IPv6Address("64:ff9b:1:a9fe:a9:fe00::"))
    assert ipaddress.IPv4Address("169.254.169.254") in carried


@pytest.mark.integration
def test_the_api_refuses_a_nat64_metadata_target_and_stores_nothing(api: Api) -> None:
    answer = api.call(
        "POST",
        "/jobs",
        {"name": "n", "schedule": "* * * * *", "target": {"type": "http", "url": "http://[64:ff9b::a9fe:a9fe]/"}},
    )
    assert (answer.status, answer.body["code"], answer.fields) == (422, "target_refused", ["target.url"])
    assert api.engine.store.list_jobs(OWNER).items == []
