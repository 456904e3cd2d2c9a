"""Where targets may point: the SSRF guard, as pure functions over addresses and URLs.

A job's owner chooses the URL a worker connects to, from inside our network. Without a guard,
``http://169.254.169.254/...`` would hand them the worker's cloud credentials. The rules:

- Always refused: link-local addresses (169.254.0.0/16, fe80::/10: the instance metadata service
  lives there), fd00:ec2::/32 (EC2's IPv6 metadata, DNS and agent addresses, which ``allow_private``
  must not open), "this network" 0.0.0.0/8 and ``::``
  (0.0.0.0 reaches the local host on Linux), broadcast and multicast, and well-known metadata
  host names.
- Refused unless the policy allows them: loopback (127.0.0.0/8, ::1, ``localhost``) with
  ``allow_loopback``; every other non-global address (private 10/8, 172.16/12, 192.168/16,
  fc00::/7, shared 100.64/10, reserved and documentation ranges) with ``allow_private``.
  ``punctual dev`` allows loopback; the AWS deployment allows neither by default.
- An IPv6 address that carries an IPv4 address is judged as that IPv4 address too (refused if
  either is): IPv4-mapped ``::ffff:a.b.c.d``, IPv4-translated ``::ffff:0:a.b.c.d``,
  IPv4-compatible ``::a.b.c.d``, NAT64 ``64:ff9b::a.b.c.d`` and the local-use NAT64 prefix
  ``64:ff9b:1::/48`` (private; every RFC 6052 layout of it is checked, as the operator picks one),
  6to4 ``2002:aabb:ccdd::`` and Teredo ``2001::/32`` (server and client). Otherwise
  ``64:ff9b::a9fe:a9fe`` reaches 169.254.169.254 through a NAT64 gateway.

Checks happen twice: when a job is created or its target changed (:func:`check_target`, on the
URL as written: a literal address or a well-known name, no DNS lookup, so the API stays fast and
deterministic) and before every attempt on the *resolved* addresses, connecting to the address
that was checked (so a DNS answer that changes between check and connect, "DNS rebinding", cannot
slip through). See ``punctual.execution.targets.http``. Whether a request can be built from the
target at all (URL syntax, headers) is decided by ``punctual.execution.targets.request_rules``,
which the check and the request builders share.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass

from punctual.config import Settings
from punctual.execution.targets.request_rules import (
    RESERVED_HEADER_PREFIX,
    RESERVED_HEADERS,
    TargetRefused,
    check_headers,
    header_refusals,
    target_url,
)
from punctual.model import HttpTarget

__all__ = [
    "RESERVED_HEADERS",
    "RESERVED_HEADER_PREFIX",
    "TargetPolicy",
    "TargetRefused",
    "address_refusal",
    "check_headers",
    "check_target",
    "check_url",
    "host_refusal",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ALWAYS_REFUSED_NETWORKS = tuple(
    ipaddress.ip_network(net)
    for net in (
        "169.254.0.0/16",  # IPv4 link-local: EC2/ECS/GCP/Azure metadata, ECS task credentials
        "fe80::/10",  # IPv6 link-local
        "fd00:ec2::/32",  # EC2 over IPv6: metadata (::254), DNS (::253), time and agent addresses
        "0.0.0.0/8",  # "this network"; 0.0.0.0 connects to the local host on Linux
        "::/128",  # unspecified
        "255.255.255.255/32",  # broadcast
        "224.0.0.0/4",  # IPv4 multicast
        "ff00::/8",  # IPv6 multicast
    )
)
METADATA_HOSTNAMES = frozenset(
    {"metadata", "metadata.google.internal", "instance-data", "instance-data.ec2.internal", "metadata.azure.internal"}
)


@dataclass(frozen=True, slots=True)
class TargetPolicy:
    """Which non-public addresses HTTP targets may reach (public addresses are always allowed)."""

    allow_private: bool = False  # 10/8, 172.16/12, 192.168/16, fc00::/7, 100.64/10, reserved ranges
    allow_loopback: bool = False  # 127/8, ::1, localhost: `punctual dev` turns this on

    @classmethod
    def of(cls, settings: Settings) -> TargetPolicy:
        """The policy ``settings`` configure (``PUNCTUAL_TARGET_ALLOW_LOOPBACK`` / ``_PRIVATE``)."""
        return cls(allow_loopback=settings.target_allow_loopback, allow_private=settings.target_allow_private)


def check_target(target: object, policy: TargetPolicy) -> None:
    """Refuse a target that can never be delivered under ``policy``. Raises :class:`TargetRefused`
    (one detail per problem, each naming its field: ``target.url``, ``target.headers.<name>``).

    HTTP targets: a URL and headers a request can be built from (the rules the request builders
    apply: ``punctual.execution.targets.request_rules``) and a host that is not refused (literal
    addresses and well-known names; names are resolved and checked again before every attempt).
    The AWS kinds are fully validated by their models (ARN and URL patterns); nothing more to check here.
    """
    if not isinstance(target, HttpTarget):
        return
    problems: list[TargetRefused] = []
    try:
        check_url(target.url, policy)
    except TargetRefused as exc:
        problems.append(exc)
    for field, headers in (("target.headers", target.headers), ("target.secret_headers", target.secret_headers)):
        problems.extend(header_refusals(headers, field))
    if len(problems) == 1:
        raise problems[0]
    if problems:
        shown = "; ".join(p.message for p in problems[:3]) + (
            f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        )
        raise TargetRefused(shown, details=[{"field": p.field, "message": p.message} for p in problems])


def check_url(url: str, policy: TargetPolicy, field: str = "target.url") -> None:
    """Refuse a URL no request can be built from, or whose (literal or well-known) host the policy
    refuses; the refusal names ``field`` (a job's ``notify.url`` is checked as its ``target.url``)."""
    host = target_url(url, field).host.rstrip(".").lower()
    reason = host_refusal(host, policy)
    if reason is not None:
        raise TargetRefused(f"{field} points to {reason}, which targets may not reach", field=field)


def host_refusal(host: str, policy: TargetPolicy) -> str | None:
    """Why ``host`` (a name or a literal address, lower case) is refused, or None if not (yet) refused."""
    if host in METADATA_HOSTNAMES:
        return f"a cloud metadata service ({host})"
    if host == "localhost" or host.endswith(".localhost"):
        return None if policy.allow_loopback else f"a loopback host ({host})"
    address = _literal_address(host)
    if address is None:
        return None  # a name: judged on its resolved addresses before every attempt
    return address_refusal(address, policy)


_NUMERIC_HOST = re.compile(r"^(0x[0-9a-f]+|[0-9]+)(\.(0x[0-9a-f]+|[0-9]+)){0,3}$")


def _literal_address(host: str) -> IPAddress | None:
    """The address a host written as a literal means, including the legacy numeric IPv4 forms
    the resolver accepts (``2852039166``, ``0xa9fea9fe``, ``0251.0376.0251.0376`` are all
    169.254.169.254), so they are refused at creation like the dotted form."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if not _NUMERIC_HOST.match(host):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def address_refusal(address: IPAddress, policy: TargetPolicy) -> str | None:
    """Why a worker may not connect to ``address`` under ``policy``, or None if it may.

    An IPv6 address carrying IPv4 addresses (see the module docstring) is refused when any of
    them is, and judged as an IPv6 address as well.
    """
    if isinstance(address, ipaddress.IPv6Address):
        for carried in embedded_ipv4(address):
            reason = _single_refusal(carried, policy)
            if reason is not None:
                return f"{reason} inside {address}"
        if address.ipv4_mapped is not None:  # exactly an IPv4 address on a dual-stack socket
            return None
    return _single_refusal(address, policy)


# RFC 6052 §2.2: where an IPv4 address sits in a NAT64 address, per prefix length (bits 64-71 are
# the reserved "u" octet): (start bit, length) pieces, concatenated.
_RFC6052_LAYOUTS: dict[int, tuple[tuple[int, int], ...]] = {
    48: ((48, 16), (72, 16)),
    56: ((56, 8), (72, 24)),
    64: ((72, 32),),
    96: ((96, 32),),
}
_NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL_USE = ipaddress.IPv6Network("64:ff9b:1::/48")  # RFC 8215; the operator picks the prefix length
_IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")  # RFC 2765 (SIIT)
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")  # deprecated, still routed by some stacks
# Not global, although Python 3.11's ipaddress says it is (later versions agree).
EXTRA_PRIVATE_NETWORKS = (_NAT64_LOCAL_USE,)


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """Every IPv4 address ``address`` may carry (empty for a plain IPv6 address)."""
    value = int(address)
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address in _IPV4_TRANSLATED or address in _NAT64_WELL_KNOWN:
        return [ipaddress.IPv4Address(value & 0xFFFFFFFF)]
    if address in _IPV4_COMPATIBLE:
        return [] if value <= 1 else [ipaddress.IPv4Address(value)]  # :: and ::1 are IPv6 themselves
    if address in _NAT64_LOCAL_USE:
        return [ipaddress.IPv4Address(_bits(value, layout)) for layout in _RFC6052_LAYOUTS.values()]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return list(address.teredo)
    return []


def _bits(value: int, layout: tuple[tuple[int, int], ...]) -> int:
    result = 0
    for start, length in layout:
        result = (result << length) | ((value >> (128 - start - length)) & ((1 << length) - 1))
    return result


def _single_refusal(address: IPAddress, policy: TargetPolicy) -> str | None:
    if any(address in net for net in ALWAYS_REFUSED_NETWORKS if net.version == address.version):
        return f"a link-local, metadata, multicast or unspecified address ({address})"
    if address.is_loopback:
        return None if policy.allow_loopback else f"a loopback address ({address})"
    if address.is_global and not any(
        address in net for net in EXTRA_PRIVATE_NETWORKS if net.version == address.version
    ):
        return None
    return None if policy.allow_private else f"a private or reserved address ({address})"
