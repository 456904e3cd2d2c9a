"""Whether an HTTP target can be turned into a request: one set of rules for the check and the builders.

The create and PATCH check (:func:`punctual.execution.targets.policy.check_target`) and both request
builders (the blocking ``http`` target and the worker's ``aio``/``wire`` client) parse a target's
URL with :func:`target_url` and check its headers with :func:`check_headers`, so nothing passes the
check that a builder then refuses. A job stored before a rule existed meets the same function when
its request is built; the attempt then fails at once and not retryably, with the same message
(``punctual.execution.targets.unbuildable``), instead of failing every attempt until the run is dead.

The URL (the rules of the builders' parser, ``httpx.URL``, plus what it lets through that no
request can use):

- scheme ``http`` or ``https``; no user name or password (credentials go in ``secret_headers``:
  the two clients would treat them differently, and a URL is shown to whoever reads the job);
- a host that is an IP address literal (no IPv6 zone) or a host name: labels of letters, digits,
  ``-`` and ``_`` (IDNA names are encoded first), at most 63 characters each and 253 in all, with
  no empty label; a name whose last label is a number must be an IPv4 address. So ``%09`` or
  ``%41`` in a host, full-width digits and characters IDNA refuses are all refused here;
- a port of ASCII digits between 1 and 65535 (``httpx`` reads a port in full-width digits as the
  number they look like; ``urllib`` refuses it).

A header: its name an RFC 9110 token, not one Punctual sets itself, and its value visible ASCII,
with spaces and tabs only between visible characters (RFC 9110 ``field-value``). Non-ASCII
values are refused rather than sent as Latin-1: the blocking client cannot send them at all, and a
receiver reads such bytes in an encoding of its own choosing (RFC 9110 §5.5). Percent-encode or
base64 such a value.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from punctual.errors import InvalidInput

# Headers the worker sets itself; a job may not send its own version of them.
RESERVED_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "idempotency-key", "punctual-signature"}
)
RESERVED_HEADER_PREFIX = "x-punctual-"
MAX_HOST_CHARS = 253
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 token
_HEADER_VALUE = re.compile(r"(?:[\x21-\x7e]+(?:[ \t]+[\x21-\x7e]+)*)?")  # RFC 9110 field-value, ASCII only
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_NUMBER = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)")
_PORT = re.compile(r"[0-9]{1,5}")
# What RFC 3986 allows in an authority, plus any non-ASCII character (an IDN host is encoded later).
_AUTHORITY = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@\[\]%\x80-\U0010ffff]*")


class TargetRefused(InvalidInput):
    """A target that cannot be delivered: the policy does not allow where it points, or no request
    can be built from it (at job creation: a 422 naming the field; at execution: a failed run)."""

    code = "target_refused"


@dataclass(frozen=True, slots=True)
class TargetUrl:
    """The parts of a target URL a request is built from."""

    scheme: str  # "http" | "https"
    host: str  # IDNA-encoded name, or an address literal (no brackets)
    port: int  # explicit, or the scheme's default
    netloc: str  # the Host header
    path: str  # path and query as sent (percent-encoded ASCII)
    literal: bool  # host is an IP address literal


def target_url(url: str, field: str = "target.url") -> TargetUrl:
    """The parts of ``url``, or :class:`TargetRefused` naming ``field`` (see the module docstring)."""
    try:
        return _parse(url)
    except _Refusal as exc:
        raise TargetRefused(f"{field}: {exc}", field=field) from None


class _Refusal(ValueError):
    pass


@lru_cache(maxsize=4096)
def _parse(url: str) -> TargetUrl:
    """:func:`target_url` (cached: parsing costs more than a no-op call, and most jobs reuse a few URLs)."""
    import httpx  # here, not at import: the API imports this module and rarely needs httpx

    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise _Refusal(f"not a URL a request can be sent to: {exc}") from None
    if parsed.scheme not in ("http", "https"):
        raise _Refusal("must start with http:// or https://")
    _check_authority(url)
    if parsed.userinfo:
        raise _Refusal("must not carry a user name or password: send credentials in target.secret_headers")
    host = parsed.raw_host.decode("ascii")
    literal = _check_host(host)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    netloc = parsed.netloc.decode("ascii")
    return TargetUrl(parsed.scheme, host, port, netloc, parsed.raw_path.decode("ascii"), literal)


def _check_authority(url: str) -> None:
    """Refuse an authority with characters RFC 3986 does not allow there (``\\``, ``^``, ``|``,
    controls: clients disagree on where such a host ends) and a port that is not 1-65535 in ASCII."""
    try:
        authority = urlsplit(url).netloc
    except ValueError as exc:
        raise _Refusal(f"not a valid URL: {exc}") from None
    if not _AUTHORITY.fullmatch(authority):
        bad = next(c for c in authority if not _AUTHORITY.fullmatch(c))
        raise _Refusal(f"the host part contains {bad!r}, which a URL may not hold there")
    host_and_port = authority.rpartition("@")[2]
    port = host_and_port.rpartition("]")[2] if host_and_port.startswith("[") else host_and_port
    _, colon, text = port.rpartition(":")
    if not colon or not text:
        return
    if not _PORT.fullmatch(text) or not 1 <= int(text) <= 65535:
        raise _Refusal(f"the port {text!r} is not a number from 1 to 65535")


def _check_host(host: str) -> bool:
    """Whether ``host`` (as the builders send it) is an address literal; refuses a host that is
    neither a literal nor a valid host name."""
    if not host:
        raise _Refusal("must name a host")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None:
        if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
            raise _Refusal("an IPv6 zone (%) cannot be used in a target URL")
        return True
    name = host[:-1] if host.endswith(".") else host
    labels = name.split(".")
    if len(name) > MAX_HOST_CHARS or not all(_LABEL.fullmatch(label) for label in labels):
        raise _Refusal(
            f"the host {host!r} is not a valid host name (letters, digits, '-' and '_' in dot-separated labels "
            "of at most 63 characters) or IP address"
        )
    if _NUMBER.fullmatch(labels[-1]):  # a name ending in a number is an IPv4 address, or nothing
        try:
            socket.inet_aton(name)
        except OSError:
            raise _Refusal(f"the host {host!r} is not a valid IPv4 address") from None
    return False


def check_headers(headers: Mapping[str, str], field: str = "target.headers") -> None:
    """Refuse a header no request can carry or that Punctual sets itself. Raises
    :class:`TargetRefused` naming the first such header (``target.headers.<name>``)."""
    refusals = header_refusals(headers, field)
    if refusals:
        raise refusals[0]


def header_refusals(headers: Mapping[str, str], field: str = "target.headers") -> list[TargetRefused]:
    """One :class:`TargetRefused` per header of ``headers`` that :func:`header_problem` finds wrong."""
    refusals = []
    for name, value in headers.items():
        problem = header_problem(name, value)
        if problem is not None:
            refusals.append(TargetRefused(f"{field}.{name}: {problem}", field=f"{field}.{name}"))
    return refusals


def header_problem(name: str, value: str) -> str | None:
    """What is wrong with the header ``name: value`` (None: nothing)."""
    if not _HEADER_NAME.fullmatch(name):
        return f"the header name {name!r} is not an HTTP token (letters, digits and !#$%&'*+.^_`|~-)"
    lower = name.lower()
    if lower in RESERVED_HEADERS or lower.startswith(RESERVED_HEADER_PREFIX):
        return f"the header {name!r} is set by Punctual and cannot be overridden"
    if _HEADER_VALUE.fullmatch(value):
        return None
    bad = next((c for c in value if not ("\x20" <= c <= "\x7e" or c == "\t")), None)
    if bad in ("\r", "\n", "\x00"):
        return f"the value of {name!r} contains a line break or NUL"
    if bad is not None and not bad.isascii():
        return (
            f"the value of {name!r} contains {bad!r}, which is not ASCII: header values are visible ASCII "
            "(percent-encode or base64 other text)"
        )
    if bad is not None:
        return f"the value of {name!r} contains the control character {bad!r}"
    return f"the value of {name!r} starts or ends with whitespace"
