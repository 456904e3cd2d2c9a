"""Request signing for HTTP targets, and the headers every HTTP attempt carries. Pure: no I/O.

Each attempt is signed with the owner's signing secret (``GET /signing-secret`` shows it to its
owner), as Stripe and Upstash QStash sign webhooks, so a target can check that a call came from
this deployment, for this request of this run, and is not a replay:

    Punctual-Signature: t=<unix seconds>,v1=<hex>,v2=<hex>

``v2`` is the hex HMAC-SHA256, under the secret string as shown (``psk_...``, UTF-8), of
:func:`canonical_v2` followed by the body: the lines ``v2``, ``t``, the run id, the job id, the
method, the host and the path with its query, each ending in a newline, then the exact body bytes
(none for GET and DELETE). None of those lines can hold a newline (the ids and the method are
tokens, the host and the request target are what HTTP/1.1 sends, and :func:`verify` refuses a
newline), and the body comes last, so two different requests never sign the same bytes. The host
is the ``Host`` header as sent, in lower case, with the port unless it is the scheme's default
(:func:`canonical_host`); the path and query are the request target exactly as sent. Both are
read from the target URL by ``request_rules.target_url`` (``TargetUrl.netloc`` and ``.path``), the
one parser the create check, both clients and :func:`verify` share.

``v1`` (``"<t>.<run id>.<body>"``) covers neither the request nor the job: a call captured at one
endpoint verifies at every other endpoint of the same owner within the tolerance. It is still sent
with v2 until 0.2.0, for receivers that check v1 alone (:data:`V1_BY_DEFAULT`); a job opts out
with ``target.signature: "v2"`` (:class:`~punctual.model.Signatures`). :func:`verify` checks v2
and accepts v1 only when told to (``accept_v1``); ``docs/api.md`` shows the same in a few lines.

Both HTTP clients (the blocking ``http`` target and the asyncio ``aio`` one) build their headers
here, so the two can never sign differently.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping
from functools import lru_cache

from punctual.clock import iso
from punctual.execution.targets.request_rules import (
    TargetRefused,
    canonical_host,  # noqa: F401 - the Host rule v2 signs: kept with the URL rules (TargetUrl.netloc), named here too
    target_url,
)
from punctual.execution.targets.types import Invocation
from punctual.model import Signatures
from punctual.runs import tokens

SIGNATURE_HEADER = "Punctual-Signature"
V1, V2 = "v1", "v2"
SCHEME = V2  # the scheme a receiver verifies (GET /signing-secret)
# Until this release a job without ``target.signature`` is also signed with v1 (after it: v2 alone);
# tests/unit/test_signing.py fails once pyproject's version reaches it with V1_BY_DEFAULT still on.
V1_UNTIL = "0.2.0"
V1_BY_DEFAULT = True
DEFAULT_TOLERANCE_S = 300
USER_AGENT = "punctual/0.1"
JOB_MAY_SET = frozenset({"user-agent", "content-type"})  # of the headers below, the two a job may set itself


class SignatureError(ValueError):
    """A request whose signature is missing, malformed, wrong or too old."""


def signs_v1(choice: Signatures | None) -> bool:
    """Whether a target whose ``signature`` is ``choice`` gets a v1 signature besides v2."""
    return choice is Signatures.V1_V2 or (choice is None and V1_BY_DEFAULT)


def canonical_v2(timestamp: int, run_id: str, *, job_id: str, method: str, host: str, path: str) -> bytes:
    """What v2 signs before the body: ``v2``, then each field on its own line (each ending in
    ``\\n``). ``host`` is already :func:`canonical_host`; ``path`` is the path and query as sent."""
    return f"{V2}\n{timestamp}\n{run_id}\n{job_id}\n{method}\n{host}\n{path}\n".encode()


def signature(secret: str, timestamp: int, run_id: str, body: bytes) -> str:
    """The v1 signature: the hex HMAC-SHA256 of ``"<timestamp>.<run_id>.<body>"`` under ``secret``."""
    signer = _keyed(secret).copy()
    signer.update(f"{timestamp}.{run_id}.".encode() + body)
    return signer.hexdigest()


def signature_v2(
    secret: str, timestamp: int, run_id: str, body: bytes, *, job_id: str, method: str, host: str, path: str
) -> str:
    """The v2 signature: the hex HMAC-SHA256 of :func:`canonical_v2` and ``body`` under ``secret``
    (``host`` already :func:`canonical_host`)."""
    signer = _keyed(secret).copy()
    signer.update(canonical_v2(timestamp, run_id, job_id=job_id, method=method, host=host, path=path) + body)
    return signer.hexdigest()


@lru_cache(maxsize=1024)
def _keyed(secret: str) -> hmac.HMAC:
    """An HMAC keyed with ``secret`` and fed nothing yet: copying it skips the key set-up, which
    OpenSSL 3 makes cost more than the hash itself (4.4 us one-shot, 2.9 us from a copy, measured
    here). Every attempt of an owner is signed with the same secret."""
    return hmac.new(secret.encode(), digestmod=hashlib.sha256)


def signature_header(
    secret: str, timestamp: int, run_id: str, body: bytes, *, job_id: str, method: str, host: str, path: str, v1: bool
) -> str:
    """The value of the ``Punctual-Signature`` header of a request sent as ``<method> <path>`` with
    ``Host: <host>`` (already :func:`canonical_host`, as both clients send it): ``t=<timestamp>,v2=<hex>``,
    with ``v1=<hex>`` before v2 if ``v1``. It signs what :func:`signature_v2` signs, spelled out
    rather than called: it runs once per attempt on the worker's hot path."""
    keyed = _keyed(secret)
    signer = keyed.copy()
    signer.update(f"{V2}\n{timestamp}\n{run_id}\n{job_id}\n{method}\n{host}\n{path}\n".encode() + body)
    if not v1:
        return f"t={timestamp},{V2}={signer.hexdigest()}"
    older = keyed.copy()
    older.update(f"{timestamp}.{run_id}.".encode() + body)
    return f"t={timestamp},{V1}={older.hexdigest()},{V2}={signer.hexdigest()}"


def verify(
    secret: str,
    header: str | None,
    run_id: str,
    body: bytes,
    *,
    method: str,
    url: str,
    job_id: str,
    accept_v1: bool = False,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> int:
    """Check a received ``Punctual-Signature`` header; return its timestamp.

    ``header`` is the header's value, ``run_id`` and ``job_id`` the ``X-Punctual-Run-Id`` and
    ``X-Punctual-Job-Id`` headers, ``body`` the raw request body, ``method`` the request's method
    and ``url`` the URL it was sent to: ``<scheme>://<Host header><request target as received>``
    (the target's raw path and query, percent-escapes untouched), or the job's ``target.url``.

    A header with a ``v2`` signature is checked against v2 alone. A header without one (sent by a
    worker older than v2) is accepted only with ``accept_v1``, if a ``v1`` signature matches.
    Several signatures of a scheme are allowed (secret rotation). Raises :class:`SignatureError`
    when the header is missing or malformed, no signature matches (another secret, or the
    signature of another request: method, host, path, query, job, run or body), or the timestamp
    is further than ``tolerance_s`` from ``now`` (default: the current time).
    """
    if not header:
        raise SignatureError(f"no {SIGNATURE_HEADER} header")
    timestamp, candidates = _parse_header(header)
    if candidates[V2]:
        expected = signature_v2(
            secret, timestamp, run_id, body, job_id=job_id, **_request_of(method, url, run_id, job_id)
        )
        if not _matches(expected, candidates[V2]):
            raise SignatureError(
                "v2 signature does not match: another secret, or a call signed for another method, host, "
                "path and query, job, run or body (a replay, or a url that is not the one the call was sent to)"
            )
    elif not accept_v1:
        raise SignatureError(f"no v2 signature; v1 alone is accepted only with accept_v1 (until {V1_UNTIL})")
    elif not _matches(signature(secret, timestamp, run_id, body), candidates[V1]):
        raise SignatureError("v1 signature does not match (another secret, run id or body)")
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_s:
        raise SignatureError(f"timestamp is more than {tolerance_s} s away: a replay, or a skewed clock")
    return timestamp


def _parse_header(header: str) -> tuple[int, dict[str, list[str]]]:
    """The timestamp and the signatures by scheme of a header's value (other schemes ignored)."""
    timestamp: int | None = None
    candidates: dict[str, list[str]] = {V1: [], V2: []}
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and value.isascii() and value.isdigit():
            timestamp = int(value)
        elif name in candidates and value:
            candidates[name].append(value)
    if timestamp is None or not (candidates[V1] or candidates[V2]):
        raise SignatureError(f"malformed {SIGNATURE_HEADER} header")
    return timestamp, candidates


def _request_of(method: str, url: str, run_id: str, job_id: str) -> dict[str, str]:
    """The method, canonical host and path with query of a received request, as v2 signs them.
    Raises :class:`SignatureError` for a URL no worker sends to (``target_url`` refuses it: not
    http(s), no host, a user name, a host or port no request can use), or a field with a line break."""
    try:  # the parser the worker built the request with, so both read one URL alike
        parsed = target_url(url, "url")
    except (TargetRefused, TypeError) as exc:
        raise SignatureError(
            f"{exc}: verify takes the absolute URL the call was sent to, http(s)://<Host header><path and query>"
        ) from exc
    fields = {"method": method.upper(), "host": parsed.netloc, "path": parsed.path}
    if any("\n" in value or "\r" in value for value in (*fields.values(), run_id, job_id)):
        raise SignatureError("a line break in the method, url, run id or job id: not a request v2 signs")
    return fields


def _matches(expected: str, candidates: list[str]) -> bool:
    return any(hmac.compare_digest(expected, candidate) for candidate in candidates)


def request_headers(
    headers: Mapping[str, str],
    invocation: Invocation,
    host_header: str,
    body: bytes | None,
    *,
    method: str,
    path: str,
    v1: bool,
    now_s: int,
) -> dict[str, str]:
    """Every header of one HTTP attempt: the job's headers and its (decrypted) secret headers,
    then ours, which the job cannot override (``check_target`` refuses that) except
    ``User-Agent`` and ``Content-Type``: a job that names one (in any case) sends its own, once;
    then the signature when the invocation carries the owner's signing secret (of ``<method> <path>``
    with ``Host: <host_header>``, which is already :func:`canonical_host`; with v1 if ``v1``).
    The ``Host`` header is always ours, so the host v2 signs is the one sent: the builders refuse a
    job's ``Host`` (``request_rules.check_headers``) before they get here."""
    built = {**headers, **invocation.secret_headers}
    ours = {
        "Host": host_header,
        "User-Agent": USER_AGENT,
        "Content-Type": "application/json",
        "Idempotency-Key": invocation.run_id,
        "X-Punctual-Run-Id": invocation.run_id,
        "X-Punctual-Attempt": str(invocation.attempt),
        "X-Punctual-Scheduled-At": _iso(invocation.scheduled_at),
        "X-Punctual-Job-Id": invocation.job_id,
    }
    if invocation.callback is not None:  # a callback job: where to report, and this attempt's token
        ours[tokens.URL_HEADER], ours[tokens.TOKEN_HEADER] = invocation.callback
    named = {name.lower() for name in built} & JOB_MAY_SET
    built.update({name: value for name, value in ours.items() if name.lower() not in named})
    if invocation.signing_secret:
        built[SIGNATURE_HEADER] = signature_header(
            invocation.signing_secret,
            now_s,
            invocation.run_id,
            body or b"",
            job_id=invocation.job_id,
            method=method,
            host=host_header,
            path=path,
            v1=v1,
        )
    return built


def header_block(
    headers: Mapping[str, str],
    invocation: Invocation,
    host_header: str,
    body: bytes | None,
    *,
    method: str,
    path: str,
    v1: bool,
    now_s: int,
) -> str:
    """The headers of :func:`request_headers` as header lines, each ending in CRLF, for the asyncio
    client (``punctual.execution.targets.wire``). A job without headers of its own (most) skips the
    dict: one template, the same headers in the same order."""
    if headers or invocation.secret_headers or invocation.callback is not None:
        built = request_headers(headers, invocation, host_header, body, method=method, path=path, v1=v1, now_s=now_s)
        return "".join([f"{name}: {value}\r\n" for name, value in built.items()])
    return plain_block(
        host_header,
        invocation.run_id,
        invocation.job_id,
        attempt=invocation.attempt,
        scheduled_at=invocation.scheduled_at,
        secret=invocation.signing_secret,
        body=body,
        method=method,
        path=path,
        v1=v1,
        now_s=now_s,
    )


def plain_block(
    host_header: str,
    run_id: str,
    job_id: str,
    *,
    attempt: int,
    scheduled_at: int,
    secret: str | None,
    body: bytes | None,
    method: str,
    path: str,
    v1: bool,
    now_s: int,
) -> str:
    """:func:`header_block` of an attempt whose job has no headers of its own (most): one template,
    the same headers in the same order as :func:`request_headers`, signed with ``secret`` if any."""
    block = (
        f"Host: {host_header}\r\nUser-Agent: {USER_AGENT}\r\nContent-Type: application/json\r\n"
        f"Idempotency-Key: {run_id}\r\nX-Punctual-Run-Id: {run_id}\r\nX-Punctual-Attempt: {attempt}\r\n"
        f"X-Punctual-Scheduled-At: {_iso(scheduled_at)}\r\nX-Punctual-Job-Id: {job_id}\r\n"
    )
    if secret:
        value = signature_header(
            secret,
            now_s,
            run_id,
            body or b"",
            job_id=job_id,
            method=method,
            host=host_header,
            path=path,
            v1=v1,
        )
        block += f"{SIGNATURE_HEADER}: {value}\r\n"
    return block


@lru_cache(maxsize=4096)
def _iso(scheduled_at: int) -> str:
    """The X-Punctual-Scheduled-At value; runs of one burst share their instant, so it is cached."""
    return iso(scheduled_at) or ""
