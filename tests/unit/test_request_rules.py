"""What an HTTP target's request can be built from (``punctual.execution.targets.request_rules``).

Issue 26 case 4: the create check accepted headers and URLs that the request builders then refused
on every attempt. The check and the builders now call the same functions; these tests pin the rules
and prove the property that matters: whatever the check accepts, both builders (the worker's wire
client and httpx/h11 under the blocking target) can turn into a request.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import h11
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from punctual.execution.targets import TargetPolicy, check_target, wire
from punctual.execution.targets.request_rules import TargetRefused, check_headers, header_problem, target_url
from punctual.model import HttpTarget

pytestmark = pytest.mark.unit

EVERYWHERE = TargetPolicy(allow_private=True, allow_loopback=True)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://example.com:\uff18\uff10/x", "port"),  # full-width digits: httpx reads 80, urllib refuses
        ("https://\uff11\uff12\uff17.0.0.1/", "not a URL"),  # full-width digits in the host (IDNA refuses them)
        ("https://ex%09ample.com/", "host name"),  # a percent-escape in the host
        ("https://ex%41mple.com/", "host name"),
        ("https://exam\u200bple.com/", "not a URL"),  # a zero-width space
        ("https://example.com:0/", "port"),
        ("https://example.com:65536/", "port"),
        ("https://example.com:+80/", "port"),
        ("https://user:pw@example.com/", "user name"),
        ("https://example.com\\@evil.example/", "host part contains"),
        ("https://a..b/", "host name"),
        ("https://.example.com/", "host name"),
        ("https://-a.example/", "host name"),
        ("https://" + "a" * 64 + ".example/", "host name"),
        ("https://999.1.1.1/", "IPv4"),
        ("https://[fe80::1%25eth0]/", "zone"),
        ("ftp://example.com/", "http"),
    ],
)
def test_urls_no_request_can_use_are_refused_naming_the_field(url: str, why: str) -> None:
    with pytest.raises(TargetRefused, match=why) as refused:
        target_url(url)
    assert refused.value.field == "target.url"
    with pytest.raises(TargetRefused) as checked:  # and the create check says the same
        check_target(HttpTarget.model_construct(url=url, headers={}, secret_headers={}), EVERYWHERE)
    assert checked.value.field == "target.url"


@pytest.mark.parametrize(
    ("url", "host", "port", "netloc", "path"),
    [
        ("https://example.com/hook", "example.com", 443, "example.com", "/hook"),
        ("http://Example.COM:8080/a?b=1#frag", "example.com", 8080, "example.com:8080", "/a?b=1"),
        ("https://bücher.example/x", "xn--bcher-kva.example", 443, "xn--bcher-kva.example", "/x"),
        ("https://[2001:db8::1]:8443/", "2001:db8::1", 8443, "[2001:db8::1]:8443", "/"),
        ("http://example.com:/p", "example.com", 80, "example.com", "/p"),
        ("https://a_b.example.com./", "a_b.example.com.", 443, "a_b.example.com.", "/"),
        ("https://example.com/ä?x=ü", "example.com", 443, "example.com", "/%C3%A4?x=%C3%BC"),
        ("http://0x7f.1/", "0x7f.1", 80, "0x7f.1", "/"),  # a legacy IPv4 form: the policy judges it
    ],
)
def test_urls_are_read_as_the_builders_send_them(url: str, host: str, port: int, netloc: str, path: str) -> None:
    parts = target_url(url)
    assert (parts.host, parts.port, parts.netloc, parts.path) == (host, port, netloc, path)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("5 €", "not ASCII"),
        ("café", "not ASCII"),
        ("a\r\nX-Injected: 1", "line break"),
        ("a\x00", "NUL"),
        ("a\x01b", "control"),
        ("a\x7f", "control"),
        ("a\x0bb", "control"),
    ],
)
def test_header_values_no_request_can_carry_are_refused_naming_the_header(value: str, why: str) -> None:
    with pytest.raises(TargetRefused, match=why) as refused:
        check_headers({"X-Price": value})
    assert refused.value.field == "target.headers.X-Price"
    with pytest.raises(TargetRefused) as secret:
        check_headers({"Authorization": value}, "target.secret_headers")
    assert secret.value.field == "target.secret_headers.Authorization"


def test_every_problem_of_a_target_is_named_at_once() -> None:
    target = HttpTarget(
        url="https://example.com:\uff18\uff10/", headers={"X-Price": "5 €", "Ok": "fine", "Bad Name": "x"}
    )
    with pytest.raises(TargetRefused) as refused:
        check_target(target, EVERYWHERE)
    assert [d["field"] for d in refused.value.details] == [
        "target.url",
        "target.headers.X-Price",
        "target.headers.Bad Name",
    ]


@pytest.mark.parametrize("value", ["", "plain", "a b\tc", "Bearer abc.def-ghi_=~", '"quoted", and; more'])
def test_visible_ascii_with_inner_spaces_is_a_header_value(value: str) -> None:
    assert header_problem("X-Ok", value) is None


def test_a_job_may_send_its_own_user_agent_and_content_type_once() -> None:
    # a job's content-type (any case) replaced ours on one client and went out twice on the other
    from punctual.execution.targets import Invocation, signing

    invocation = Invocation("run_x_1", "job_x", 1_800_000_000_000, 1, None)
    headers = {"content-type": "application/cloudevents+json", "User-Agent": "mine/1"}
    built = signing.request_headers(headers, invocation, "example.com", b"{}", now_s=0)
    assert [n for n in built if n.lower() == "content-type"] == ["content-type"]
    assert (built["content-type"], built["User-Agent"]) == ("application/cloudevents+json", "mine/1")
    block = signing.header_block(headers, invocation, "example.com", b"{}", now_s=0)
    assert block.lower().count("content-type:") == 1 and block.count("User-Agent:") == 1
    assert signing.request_headers({}, invocation, "example.com", b"{}", now_s=0)["Content-Type"] == "application/json"


# -- the property: nothing the check accepts is refused by a builder --------------------------------------

header_names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12)
header_values = st.text(st.characters(codec="utf-8"), max_size=20)


@settings(max_examples=400, deadline=None)
@given(name=header_names, value=header_values)
def test_a_header_the_check_accepts_is_one_both_clients_can_send(name: str, value: str) -> None:
    if header_problem(name, value) is not None:
        return
    # the wire client: its header block is Latin-1 bytes
    wire.encode("POST", "/", wire.header_block({name: value}), b"{}")
    # httpx over h11 (the blocking client) validates names and values before sending
    h11.Request(method="POST", target="/", headers=[("Host", "example.com"), (name, value.encode("ascii"))])
    httpx.Headers({name: value})


hosts = st.one_of(
    st.from_regex(r"[a-z0-9_\-]{1,8}(\.[a-z0-9_\-]{1,8}){0,2}", fullmatch=True),
    st.text(st.characters(codec="utf-8", exclude_characters="/?#@[]"), min_size=1, max_size=12),
)
ports = st.one_of(st.just(""), st.text(st.characters(codec="utf-8", exclude_characters="/?#@"), max_size=6))
paths = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


@settings(max_examples=400, deadline=None)
@given(host=hosts, port=ports, path=paths)
def test_a_url_the_check_accepts_is_one_both_clients_can_request(host: str, port: str, path: str) -> None:
    url = f"http://{host}{':' + port if port else ''}/{path}"
    try:
        parts = target_url(url)
    except TargetRefused:
        return
    # the URL means the same to urllib (the model's own check) as to the builders
    split = urlsplit(url)
    assert split.port in (None, parts.port)
    # the wire client: request line and Host header are ASCII
    headers = {"Host": parts.netloc}
    wire.encode("GET", parts.path, wire.header_block(headers), None).decode("ascii")
    # the blocking client: the URL it sends to (the checked address, here a stand-in) and its request line
    sent = httpx.URL(scheme=parts.scheme, host="192.0.2.1", port=parts.port, raw_path=parts.path.encode("ascii"))
    h11.Request(method="GET", target=sent.raw_path, headers=[("Host", parts.netloc)])
    assert 1 <= parts.port <= 65535
