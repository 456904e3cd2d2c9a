"""Request signatures (issue 26, case 6): v2 covers the request, v1 stays verifiable for a transition.

v1 signed ``"<t>.<run id>.<body>"`` with the owner's secret, so a call captured from
``GET https://reports.example/ping`` verified for ``DELETE https://billing.example/accounts/42?purge=1``
within the tolerance. v2 also covers the method, the host, the path with its query and the job id.
What the two clients actually send is checked in test_signing_wire.py and, through the worker,
in tests/contract/test_worker_signing.py.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from punctual.execution.targets.request_rules import target_url
from punctual.execution.targets.signing import (
    V1_BY_DEFAULT,
    V1_UNTIL,
    SignatureError,
    canonical_host,
    canonical_v2,
    signature,
    signature_header,
    signature_v2,
    signs_v1,
    verify,
)
from punctual.model import HttpTarget, Signatures

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SECRET = "psk_test-secret"
T = 1_800_000_000
RUN = "run_" + "a" * 32 + "_1800000000000"
JOB = "job_" + "a" * 32
PING = {"method": "GET", "url": "https://reports.example/ping", "job_id": JOB}
PURGE = {"method": "DELETE", "url": "https://billing.example/accounts/42?purge=1", "job_id": JOB}


def header_for(request: dict[str, str], body: bytes = b"", *, v1: bool = True, secret: str = SECRET, t: int = T) -> str:
    """The header the worker sends for ``request`` (method, url, job id), as its clients build it
    (both read the URL with ``request_rules.target_url``: Host is its netloc, the target its path)."""
    url = target_url(request["url"])
    return signature_header(
        secret,
        t,
        RUN,
        body,
        job_id=request["job_id"],
        method=request["method"],
        host=url.netloc,
        path=url.path,
        v1=v1,
    )


def test_the_canonical_string_is_one_field_a_line_then_the_body() -> None:
    canonical = canonical_v2(T, RUN, job_id=JOB, method="DELETE", host="billing.example", path="/accounts/42?purge=1")
    assert canonical == f"v2\n{T}\n{RUN}\n{JOB}\nDELETE\nbilling.example\n/accounts/42?purge=1\n".encode()
    body = b'{"n":1}'
    expected = hmac.new(SECRET.encode(), canonical + body, hashlib.sha256).hexdigest()
    assert (
        signature_v2(
            SECRET, T, RUN, body, job_id=JOB, method="DELETE", host="billing.example", path="/accounts/42?purge=1"
        )
        == expected
    )
    # the header the worker sends carries that v2, and v1 as before beside it during the transition
    assert header_for(PURGE, body) == f"t={T},v1={signature(SECRET, T, RUN, body)},v2={expected}"
    assert header_for(PURGE, body, v1=False) == f"t={T},v2={expected}"


def test_the_replay_of_the_issue_fails_under_v2_and_only_v1_would_let_it_through() -> None:
    # Given the header of a call to GET https://reports.example/ping
    captured = header_for(PING)
    assert verify(SECRET, captured, RUN, b"", **PING, now=T) == T
    # When it is replayed against DELETE https://billing.example/accounts/42?purge=1 (same owner, same run, in time)
    # Then v2 refuses it, whether or not the receiver still accepts v1
    for accept_v1 in (False, True):
        with pytest.raises(SignatureError, match="v2 signature does not match"):
            verify(SECRET, captured, RUN, b"", **PURGE, accept_v1=accept_v1, now=T + 60)
    # And with the v2 part cut off, only a receiver that opted into v1 accepts it: the hole v2 closes
    v1_only = ",".join(part for part in captured.split(",") if not part.startswith("v2="))
    with pytest.raises(SignatureError, match="accept_v1"):
        verify(SECRET, v1_only, RUN, b"", **PURGE, now=T + 60)
    assert verify(SECRET, v1_only, RUN, b"", **PURGE, accept_v1=True, now=T + 60) == T


@pytest.mark.parametrize(
    ("change", "value"),
    [
        ("method", "POST"),
        ("url", "https://other.example/accounts/42?purge=1"),  # host
        ("url", "https://billing.example:8443/accounts/42?purge=1"),  # port
        ("url", "http://billing.example:443/accounts/42?purge=1"),  # scheme: 443 is not http's default
        ("url", "https://billing.example/accounts/43?purge=1"),  # path
        ("url", "https://billing.example/Accounts/42?purge=1"),  # path, case
        ("url", "https://billing.example/accounts/42?purge=0"),  # query
        ("url", "https://billing.example/accounts/42"),  # query dropped
        ("url", "https://billing.example/accounts/42?purge=1&all=1"),  # query extended
        ("url", "https://billing.example/accounts%2F42?purge=1"),  # an escape is not its character
        ("job_id", "job_" + "b" * 32),
        ("run_id", "run_" + "b" * 32 + "_1800000000000"),
        ("body", b'{"n":2}'),
        ("secret", "psk_other"),
    ],
)
def test_a_v2_signature_verifies_for_its_own_request_only(change: str, value: Any) -> None:
    body = b'{"n":1}'
    header = header_for(PURGE, body)
    call: dict[str, Any] = {"secret": SECRET, "header": header, "run_id": RUN, "body": body, **PURGE}
    assert verify(**call, now=T) == T
    with pytest.raises(SignatureError):
        verify(**{**call, change: value}, now=T)


def test_a_changed_timestamp_breaks_the_signature_and_an_old_one_is_a_replay() -> None:
    header = header_for(PURGE)
    with pytest.raises(SignatureError, match="does not match"):
        verify(SECRET, header.replace(f"t={T}", f"t={T + 1}"), RUN, b"", **PURGE, now=T)
    with pytest.raises(SignatureError, match="replay"):
        verify(SECRET, header, RUN, b"", **PURGE, now=T + 301)
    assert verify(SECRET, header, RUN, b"", **PURGE, now=T - 300) == T


@pytest.mark.parametrize(
    ("signed", "received"),
    [
        ("https://billing.example/a?b=1", "https://BILLING.Example:443/a?b=1"),  # case, https default port
        ("http://billing.example:80/a", "http://billing.example/a"),  # http default port
        ("https://billing.example:8443/a", "https://Billing.example:8443/a"),  # a port that is not the default
        ("https://[2001:DB8::1]:8443/a?x", "https://[2001:db8::1]:8443/a?x"),  # IPv6: brackets kept, lower case
        ("https://[::1]/a", "https://[::1]:443/a"),
        ("https://bücher.example/ä?ö=1", "https://xn--bcher-kva.example/%C3%A4?%C3%B6=1"),  # as sent: IDNA, escapes
        ("https://billing.example/a#fragment", "https://billing.example/a"),  # a fragment is not sent
        ("https://billing.example", "https://billing.example/"),  # an empty path is sent as /
    ],
)
def test_verify_reads_the_url_as_the_worker_sent_it(signed: str, received: str) -> None:
    header = header_for({**PURGE, "url": signed})
    assert verify(SECRET, header, RUN, b"", **{**PURGE, "url": received}, now=T) == T


@pytest.mark.parametrize(
    ("scheme", "host", "expected"),
    [
        ("https", "Hooks.Example:443", "hooks.example"),
        ("https", "hooks.example:80", "hooks.example:80"),
        ("http", "hooks.example:80", "hooks.example"),
        ("http", "hooks.example:8080", "hooks.example:8080"),
        ("http", "[::1]:80", "[::1]"),
        ("https", "[FE80::443]", "[fe80::443]"),  # the address's last group is no port
        ("https", "[::1]:8443", "[::1]:8443"),
    ],
)
def test_the_canonical_host_is_lower_case_without_the_default_port(scheme: str, host: str, expected: str) -> None:
    assert canonical_host(scheme, host) == expected


def test_v1_alone_is_accepted_only_when_the_receiver_opts_in_and_v2_decides_when_present() -> None:
    body = b'{"n":1}'
    v1_only = f"t={T},v1={signature(SECRET, T, RUN, body)}"
    with pytest.raises(SignatureError, match="accept_v1"):
        verify(SECRET, v1_only, RUN, body, **PURGE, now=T)
    assert verify(SECRET, v1_only, RUN, body, **PURGE, accept_v1=True, now=T) == T
    with pytest.raises(SignatureError, match="v1 signature does not match"):
        verify(SECRET, v1_only, RUN, b"other", **PURGE, accept_v1=True, now=T)
    # a header with a v2 that does not match is refused even though its v1 matches: the sender
    # speaks v2, so a url the receiver rebuilt wrong shows up now, not when v1 is gone
    both = header_for(PING, body)
    with pytest.raises(SignatureError, match="v2"):
        verify(SECRET, both, RUN, body, **PURGE, accept_v1=True, now=T)


def test_several_signatures_of_a_scheme_verify_for_secret_rotation_and_unknown_schemes_are_ignored() -> None:
    old = header_for(PURGE, secret="psk_old", v1=False)
    new = header_for(PURGE, secret="psk_new", v1=False)
    rotated = old + "," + new.split(",", 1)[1] + ",v3=" + "0" * 64
    assert verify("psk_new", rotated, RUN, b"", **PURGE, now=T) == T
    assert verify("psk_old", rotated, RUN, b"", **PURGE, now=T) == T
    with pytest.raises(SignatureError):
        verify("psk_third", rotated, RUN, b"", **PURGE, now=T)


@pytest.mark.parametrize("header", [None, "", "v2=abc", "t=x,v2=abc", "t=1,v3=abc", "t=١٢,v2=abc", "t=1"])
def test_a_missing_or_malformed_header_is_refused(header: str | None) -> None:
    with pytest.raises(SignatureError):
        verify(SECRET, header, RUN, b"", **PURGE, now=T)


@pytest.mark.parametrize(
    "bad",
    [
        {"url": "/accounts/42?purge=1"},  # relative: no host
        {"url": "ftp://billing.example/x"},
        {"url": "https://[::1/x"},  # not a URL
        {"url": "https:///x"},
        # no worker sends to such a URL (request_rules refuses it at create and at the call)
        {"url": "https://user:pw@billing.example/accounts/42?purge=1"},
        {"url": "https://billing.example%09/accounts/42?purge=1"},
        {"url": "https://billing.example\n/accounts/42?purge=1"},
        {"job_id": JOB + "\nDELETE"},
        {"method": "GET\nX"},
    ],
)
def test_a_request_v2_cannot_sign_is_refused(bad: dict[str, str]) -> None:
    with pytest.raises(SignatureError):
        verify(SECRET, header_for(PURGE), RUN, b"", **{**PURGE, **bad}, now=T)
    with pytest.raises(SignatureError):
        verify(SECRET, header_for(PURGE), RUN + "\n", b"", **PURGE, now=T)


_FIELD = st.text(st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=12)
_REQUEST = st.tuples(st.integers(0, 10**12), _FIELD, _FIELD, _FIELD, _FIELD, _FIELD, st.binary(max_size=12))


@given(_REQUEST, _REQUEST)
def test_the_canonical_string_is_injective(a: tuple[Any, ...], b: tuple[Any, ...]) -> None:
    # fields without a line break, each ended by one, then the body: two requests never sign the same bytes
    def signed(request: tuple[Any, ...]) -> bytes:
        t, run_id, job_id, method, host, path, body = request
        return canonical_v2(t, run_id, job_id=job_id, method=method, host=host, path=path) + body

    assert (signed(a) == signed(b)) is (a == b)


def test_a_job_chooses_its_signatures_and_an_unset_choice_follows_the_release() -> None:
    assert signs_v1(Signatures.V1_V2) and not signs_v1(Signatures.V2)
    assert signs_v1(None) is V1_BY_DEFAULT
    target = HttpTarget(url="https://example.com/hook")
    assert target.signature is None and "signature" not in target.model_dump_json()  # unset: not stored
    chosen = HttpTarget.model_validate({"url": "https://example.com/hook", "signature": "v2"})
    assert chosen.signature is Signatures.V2 and '"signature":"v2"' in chosen.model_dump_json()
    with pytest.raises(ValidationError):
        HttpTarget.model_validate({"url": "https://example.com/hook", "signature": "v1"})


def test_v1_stops_being_sent_by_default_at_the_stated_release() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

    def parts(text: str) -> tuple[int, ...]:
        return tuple(int(part) for part in text.split(".")[:3])

    assert not (V1_BY_DEFAULT and parts(version) >= parts(V1_UNTIL)), (
        f"{version} reached {V1_UNTIL}: turn V1_BY_DEFAULT off, as docs/api.md announces"
    )
    assert f"Until {V1_UNTIL}" in (ROOT / "docs" / "api.md").read_text()


def test_the_receiver_example_of_the_docs_agrees_with_verify() -> None:
    # Given the standard-library receiver of docs/api.md
    text = (ROOT / "docs" / "api.md").read_text()
    [block] = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "def valid(" in b]
    scope: dict[str, Any] = {}
    exec(block, scope)  # the documentation's own code, from this repository
    valid = scope["valid"]
    body = b'{"n":1}'
    header = header_for(PURGE, body, t=int(__import__("time").time()))
    # Then it accepts what verify accepts and refuses the issue's replay and a changed body
    assert valid(SECRET, header, "DELETE", "billing.example", "/accounts/42?purge=1", RUN, JOB, body)
    assert valid(SECRET, header, "delete", "Billing.Example:443", "/accounts/42?purge=1", RUN, JOB, body)
    assert not valid(SECRET, header, "GET", "reports.example", "/ping", RUN, JOB, body)
    assert not valid(SECRET, header, "DELETE", "billing.example", "/accounts/42?purge=1", RUN, JOB, b"{}")
    assert not valid(
        SECRET, header, "DELETE", "billing.example:443", "/accounts/42?purge=1", RUN, JOB, body, https=False
    )
    # And the test vector it prints is the one the worker computes
    vector = re.search(r"v2=([0-9a-f]{64})", text.split("Test vector", 1)[1])
    assert vector is not None
    assert vector.group(1) == signature_v2(
        "psk_test",
        1800000000,
        "run_0123",
        b'{"n":1}',
        job_id="job_0123",
        method="POST",
        host="hooks.example",
        path="/a?b=1",
    )
