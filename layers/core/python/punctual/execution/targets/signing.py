"""Request signing for HTTP targets, and the headers every HTTP attempt carries. Pure: no I/O.

Each attempt is signed with the owner's signing secret (``GET /signing-secret`` shows it to its
owner), as Stripe and Upstash QStash sign webhooks, so a target can check that a call came from
this deployment, for this run, and is not a replay:

    Punctual-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<run id>.<body>")>

The run id is the ``X-Punctual-Run-Id`` (and ``Idempotency-Key``) header; the body is the exact
bytes received (empty for GET and DELETE). The key is the secret string as shown (``psk_...``),
UTF-8 encoded. A receiver recomputes the HMAC, compares in constant time, and refuses a timestamp
older than its tolerance (5 minutes by default): :func:`verify` does all of that, and
``docs/api.md`` shows the same in a few lines of any language.

Both HTTP clients (the blocking ``http`` target and the asyncio ``aio`` one) build their headers
with :func:`request_headers`, so the two can never sign differently.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping
from functools import lru_cache

from punctual.clock import iso
from punctual.execution.targets.types import Invocation

SIGNATURE_HEADER = "Punctual-Signature"
SCHEME = "v1"
DEFAULT_TOLERANCE_S = 300
USER_AGENT = "punctual/0.1"
JOB_MAY_SET = frozenset({"user-agent", "content-type"})  # of the headers below, the two a job may set itself


class SignatureError(ValueError):
    """A request whose signature is missing, malformed, wrong or too old."""


def signature(secret: str, timestamp: int, run_id: str, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``"<timestamp>.<run_id>.<body>"`` under ``secret``."""
    signer = _keyed(secret).copy()
    signer.update(f"{timestamp}.{run_id}.".encode() + body)
    return signer.hexdigest()


@lru_cache(maxsize=1024)
def _keyed(secret: str) -> hmac.HMAC:
    """An HMAC keyed with ``secret`` and fed nothing yet: copying it skips the key set-up, which
    OpenSSL 3 makes cost more than the hash itself (4.4 us one-shot, 2.9 us from a copy, measured
    here). Every attempt of an owner is signed with the same secret."""
    return hmac.new(secret.encode(), digestmod=hashlib.sha256)


def signature_header(secret: str, timestamp: int, run_id: str, body: bytes) -> str:
    """The value of the ``Punctual-Signature`` header."""
    return f"t={timestamp},{SCHEME}={signature(secret, timestamp, run_id, body)}"


def verify(
    secret: str,
    header: str | None,
    run_id: str,
    body: bytes,
    *,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> int:
    """Check a received ``Punctual-Signature`` header; return its timestamp.

    ``header`` is the header's value, ``run_id`` the ``X-Punctual-Run-Id`` header, ``body`` the
    raw request body. Raises :class:`SignatureError` when the header is missing or malformed, no
    ``v1`` signature matches (several are allowed, for secret rotation), or the timestamp is
    further than ``tolerance_s`` from ``now`` (default: the current time).
    """
    if not header:
        raise SignatureError(f"no {SIGNATURE_HEADER} header")
    timestamp: int | None = None
    candidates: list[str] = []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and value.isdigit():
            timestamp = int(value)
        elif name == SCHEME and value:
            candidates.append(value)
    if timestamp is None or not candidates:
        raise SignatureError(f"malformed {SIGNATURE_HEADER} header")
    expected = signature(secret, timestamp, run_id, body)
    if not any(hmac.compare_digest(expected, candidate) for candidate in candidates):
        raise SignatureError("signature does not match (wrong secret, run id or body)")
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_s:
        raise SignatureError(f"timestamp is more than {tolerance_s} s away: a replay, or a skewed clock")
    return timestamp


def request_headers(
    headers: Mapping[str, str],
    invocation: Invocation,
    host_header: str,
    body: bytes | None,
    *,
    now_s: int,
) -> dict[str, str]:
    """Every header of one HTTP attempt: the job's headers and its (decrypted) secret headers,
    then ours, which the job cannot override (``check_target`` refuses that) except
    ``User-Agent`` and ``Content-Type``: a job that names one (in any case) sends its own, once;
    then the signature when the invocation carries the owner's signing secret."""
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
    named = {name.lower() for name in built} & JOB_MAY_SET
    built.update({name: value for name, value in ours.items() if name.lower() not in named})
    if invocation.signing_secret:
        built[SIGNATURE_HEADER] = signature_header(invocation.signing_secret, now_s, invocation.run_id, body or b"")
    return built


def header_block(
    headers: Mapping[str, str],
    invocation: Invocation,
    host_header: str,
    body: bytes | None,
    *,
    now_s: int,
) -> str:
    """The headers of :func:`request_headers` as header lines, each ending in CRLF, for the asyncio
    client (``punctual.execution.targets.wire``). A job without headers of its own (most) skips the
    dict: one template, the same headers in the same order."""
    if headers or invocation.secret_headers:
        built = request_headers(headers, invocation, host_header, body, now_s=now_s)
        return "".join([f"{name}: {value}\r\n" for name, value in built.items()])
    return plain_block(
        host_header,
        invocation.run_id,
        invocation.job_id,
        attempt=invocation.attempt,
        scheduled_at=invocation.scheduled_at,
        secret=invocation.signing_secret,
        body=body,
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
        block += f"{SIGNATURE_HEADER}: t={now_s},{SCHEME}={signature(secret, now_s, run_id, body or b'')}\r\n"
    return block


@lru_cache(maxsize=4096)
def _iso(scheduled_at: int) -> str:
    """The X-Punctual-Scheduled-At value; runs of one burst share their instant, so it is cached."""
    return iso(scheduled_at) or ""
