"""The HTTP target: send the job's payload as JSON to its URL, once per attempt.

Request: ``<method> <url>`` with the job's headers plus
``Content-Type: application/json``, ``Idempotency-Key: <run_id>`` (the same on every attempt, so the
receiver can deduplicate), ``X-Punctual-Run-Id``, ``X-Punctual-Attempt``, ``X-Punctual-Scheduled-At``
(ISO 8601 UTC) and ``X-Punctual-Job-Id``. POST, PUT and PATCH carry the payload as the body; GET and
DELETE carry none. Redirects are not followed.

Answer: 2xx is success; other statuses fail, retryable or not by ``punctual.runs.retry.http_status_retryable``;
connection errors and timeouts are retryable. The first bytes of the body become the attempt's
bounded response excerpt.

SSRF: the host is resolved here, every resolved address is checked against the policy
(``punctual.execution.targets.policy``), and the connection goes to the checked address itself: the URL's
host is replaced by the address, the original name is kept in the ``Host`` header and as the TLS
server name (so certificates are still verified against the name). A DNS answer that changes
between the check and the connection therefore cannot redirect the worker. An allowed answer is
kept for 10 s (``punctual.execution.targets.resolutions``): attempts within that time go to the
address checked then.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import ssl
import time
from functools import lru_cache

import httpx

from punctual.execution.targets import signing
from punctual.execution.targets.policy import TargetPolicy, address_refusal, host_refusal
from punctual.execution.targets.request_rules import TargetRefused, TargetUrl, check_headers, target_url
from punctual.execution.targets.resolutions import RESOLUTIONS, Resolutions
from punctual.execution.targets.types import Invocation, TargetResult, failed, succeeded, timed_out, unbuildable
from punctual.model import MAX_EXCERPT_CHARS, HttpTarget, truncate
from punctual.runs.retry import http_status_retryable

USER_AGENT = signing.USER_AGENT
METHODS_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
EXCERPT_BYTES = MAX_EXCERPT_CHARS * 4  # enough UTF-8 for the excerpt; the rest of the body is never read
# One encoder for every body: json.dumps with arguments builds a new JSONEncoder per call.
_JSON = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
# A 2xx without a body is most answers: its (immutable) result is shared, not rebuilt per call.
_SUCCEEDED = {status: succeeded(status, None) for status in range(200, 300)}


class Refused(Exception):
    """The target's host resolves to an address the policy refuses."""


def send(target: HttpTarget, invocation: Invocation, policy: TargetPolicy, deadline: float) -> TargetResult:
    """Deliver one attempt to ``target`` before ``deadline`` (a ``time.monotonic()`` instant). Never raises."""
    try:  # the rules the create check applied (request_rules): a job stored before one existed fails here
        url = target_url(target.url)
        check_headers(target.headers)
        check_headers(invocation.secret_headers, "target.secret_headers")
    except TargetRefused as exc:
        return unbuildable(exc.message)
    try:
        address = resolve(url.host, url.port, policy)
    except Refused as exc:
        return failed(f"refused by the target policy: {exc}", retryable=False)
    except OSError as exc:  # DNS failure: often transient
        return failed(f"cannot resolve {url.host}: {exc}", retryable=True)

    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return timed_out(0)
    try:
        return _request(target, invocation, url, address=address, deadline=deadline, remaining=remaining)
    except httpx.TimeoutException:
        return timed_out(round(remaining, 3))
    except (httpx.HTTPError, OSError) as exc:
        return failed(f"{type(exc).__name__}: {exc}", retryable=True)


def resolve(host: str, port: int, policy: TargetPolicy, *, cache: Resolutions = RESOLUTIONS) -> str:
    """One address of ``host`` the worker may connect to. Raises :class:`Refused` or ``OSError`` (DNS).

    Every address the name resolves to must be allowed: a name that resolves to a public and a
    metadata address at once is refused rather than raced. An allowed answer is kept in ``cache``
    for a few seconds (:mod:`punctual.execution.targets.resolutions`).
    """
    reason = host_refusal(host.rstrip(".").lower(), policy)
    if reason is not None:
        raise Refused(f"{host} is {reason}")
    try:
        return str(ipaddress.ip_address(host))  # a literal address, judged just above: nothing to look up
    except ValueError:
        pass
    kept = cache.get(host, port, policy)
    if kept is not None:
        return kept
    address = _lookup(host, port, policy)
    cache.put(host, port, policy, address)
    return address


def _lookup(host: str, port: int, policy: TargetPolicy) -> str:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = [str(info[4][0]).split("%", 1)[0] for info in infos]  # drop an IPv6 zone id
    if not addresses:
        raise OSError(f"no address for {host}")
    for text in addresses:
        reason = address_refusal(ipaddress.ip_address(text), policy)
        if reason is not None:
            raise Refused(f"{host} resolves to {reason}")
    return addresses[0]


def request_headers(
    target: HttpTarget, invocation: Invocation, host_header: str, body: bytes | None = None
) -> dict[str, str]:
    """The job's headers, its secret headers, then ours (which the job cannot override:
    ``check_target`` refuses that) and the signature (``punctual.execution.targets.signing``)."""
    return signing.request_headers(target.headers, invocation, host_header, body, now_s=int(time.time()))


def _request(
    target: HttpTarget, invocation: Invocation, url: TargetUrl, *, address: str, deadline: float, remaining: float
) -> TargetResult:
    body = encode_payload(invocation.payload) if target.method in METHODS_WITH_BODY else None
    headers = request_headers(target, invocation, url.netloc, body)
    client = _client(url.scheme, url.host, address, url.port)
    with client.stream(
        target.method,
        httpx.URL(scheme=url.scheme, host=address, port=url.port, raw_path=url.path.encode("ascii")),
        content=body,
        headers=headers,
        timeout=httpx.Timeout(remaining),
        extensions={"sni_hostname": url.host},
    ) as response:
        excerpt = _excerpt(response, deadline)
    return result_of(response.status_code, excerpt, response.headers.get("location"))


@lru_cache(maxsize=256)
def _client(scheme: str, host: str, address: str, port: int | None) -> httpx.Client:
    """A pooled client per (scheme, host name, checked address, port).

    Keep-alive saves a connection per attempt (most jobs call the same few hosts), and keying the
    pool by the host *name* as well as the address means a TLS connection verified for one name is
    never reused for another name that shares the address. Clients are thread-safe; one evicted
    from the cache closes its connections when it is collected.
    """
    return httpx.Client(verify=tls_context(), trust_env=False, follow_redirects=False)


def _excerpt(response: httpx.Response, deadline: float) -> str | None:
    """The first ``EXCERPT_BYTES`` of the body (decoded, bounded); stops reading there or at the deadline."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= EXCERPT_BYTES or time.monotonic() >= deadline:
            break
    return excerpt_text(b"".join(chunks))


def encode_payload(payload: object) -> bytes:
    """The request body: the payload as compact JSON (NaN and infinities refused)."""
    return b"null" if payload is None else _JSON.encode(payload).encode()


def excerpt_text(body: bytes) -> str | None:
    """The attempt's response excerpt: the first ``EXCERPT_BYTES`` decoded, bounded to ``MAX_EXCERPT_CHARS``."""
    text = body[:EXCERPT_BYTES].decode("utf-8", errors="replace")
    return truncate(text, MAX_EXCERPT_CHARS) if text else None


def result_of(status: int, excerpt: str | None, location: str | None) -> TargetResult:
    """2xx succeeds; a redirect fails for good (never followed); other statuses by ``http_status_retryable``."""
    if 200 <= status < 300:
        return _SUCCEEDED[status] if excerpt is None else succeeded(status, excerpt)
    if 300 <= status < 400:
        error = f"HTTP {status}: redirects are not followed (Location: {location or '-'})"
        return failed(error, retryable=False, status_code=status, excerpt=excerpt)
    return failed(f"HTTP {status}", retryable=http_status_retryable(status), status_code=status, excerpt=excerpt)


def warm_up() -> None:
    """Do the one-time work now (transport imports, the CA bundle: ~150 ms), not in the first run."""
    tls_context()
    httpx.Client(verify=tls_context(), trust_env=False).close()  # imports httpcore and h11 (no I/O)


@lru_cache(maxsize=1)
def tls_context() -> ssl.SSLContext:
    # Loading the CA bundle costs tens of milliseconds: do it once per process.
    return httpx.create_ssl_context()
