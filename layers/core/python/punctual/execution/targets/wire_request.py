"""A request of the ``wire`` client (:mod:`punctual.execution.targets.wire`), encoded once, and its pool key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

PoolKey = tuple[str, str, str, int]  # (scheme, host name, checked address, port)


class Request(NamedTuple):
    """One request, encoded (:func:`encode`), to the checked address.

    ``key`` is its pool key (scheme, host name, checked address, port), built once with the request
    (off the loop when prebuilt): the name is the TLS server name (the Host header is in ``data``).
    """

    method: str
    key: PoolKey
    data: bytes  # the whole request as sent: request line, headers, Content-Length, body

    @property
    def scheme(self) -> str:  # "http" | "https"
        return self.key[0]

    @property
    def host(self) -> str:
        return self.key[1]

    @property
    def address(self) -> str:
        return self.key[2]

    @property
    def port(self) -> int:
        return self.key[3]

    @classmethod
    def of(
        cls,
        method: str,
        scheme: str,
        host: str,
        address: str,
        port: int,
        *,
        target: str,
        headers: Mapping[str, str],
        body: bytes | None = None,
    ) -> Request:
        """A request from its parts (``headers`` complete except Content-Length)."""
        return cls(method, (scheme, host, address, port), encode(method, target, header_block(headers), body))


def header_block(headers: Mapping[str, str]) -> str:
    """``headers`` as header lines, each ending in CRLF."""
    return "".join([f"{name}: {value}\r\n" for name, value in headers.items()])


def encode(method: str, target: str, block: str, body: bytes | None) -> bytes:
    """The request as sent: ``block`` holds the header lines (:func:`header_block`) but Content-Length."""
    if body is None:
        return f"{method} {target} HTTP/1.1\r\n{block}\r\n".encode("latin-1")
    return f"{method} {target} HTTP/1.1\r\n{block}Content-Length: {len(body)}\r\n\r\n".encode("latin-1") + body
