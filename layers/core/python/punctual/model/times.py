"""Times as the API accepts them: RFC 3339 text with a UTC offset, never a number; and time zones,
by their IANA names only.

Inside the domain, times are integer epoch milliseconds (UTC); these types are for the edges.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, tzinfo
from functools import cache
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pydantic import AfterValidator, AwareDatetime, BeforeValidator, Field, ValidationInfo

from punctual.errors import InvalidTimezone
from punctual.model.stored import is_stored

_UTC_NAMES = frozenset({"UTC", "Etc/UTC"})
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def _rfc3339_only(value: Any, info: ValidationInfo) -> Any:
    """A time given as text must be an RFC 3339 date-time (what the API documents as
    ``format: date-time``); pydantic alone also reads ``0.5`` or ``1800000000`` as epoch seconds."""
    if is_stored(info):  # written by our own serializer
        return value
    if isinstance(value, str) and not _RFC3339.match(value):
        raise ValueError("must be an RFC 3339 date-time with a UTC offset, e.g. 2026-12-01T09:00:00+01:00")
    if isinstance(value, int | float):  # bool included
        raise ValueError("must be an RFC 3339 date-time string, not a number")
    return value


# A datetime from Python code, or RFC 3339 text from a request (never a number).
Rfc3339 = Annotated[datetime, BeforeValidator(_rfc3339_only)]
AwareRfc3339 = Annotated[AwareDatetime, BeforeValidator(_rfc3339_only)]


def validate_timezone(name: str) -> str:
    """Return ``name`` if it is an IANA time zone, else raise InvalidTimezone.

    Only names of the IANA database count: host-dependent files that zoneinfo would also load
    (``localtime``, ``posixrules``, ``Factory``) mean different things on different machines.
    """
    if name != "UTC" and name not in _iana_names():
        raise InvalidTimezone(f"unknown time zone {name!r} (use an IANA name such as 'Europe/Berlin')")
    zone(name)
    return name


def _timezone_field(value: str, info: ValidationInfo) -> str:
    """:func:`validate_timezone` as a field's check: a ValueError (a 422 naming the field) for input,
    nothing for a stored document (its zone passed this check when it was written)."""
    if is_stored(info):
        return value
    try:
        return validate_timezone(value)
    except InvalidTimezone as exc:
        raise ValueError(exc.message) from exc


# A job's or a calendar's ``timezone``: an IANA name (``validate_timezone``).
TimezoneName = Annotated[str, Field(min_length=1, max_length=64), AfterValidator(_timezone_field)]


def zone(name: str) -> tzinfo:
    """The time zone ``name`` names (UTC itself for UTC). Raises InvalidTimezone."""
    if name in _UTC_NAMES:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # "../x", "America", too long
        raise InvalidTimezone(f"unknown time zone {name!r}") from None


def known_zones() -> frozenset[str]:
    """Every name :func:`validate_timezone` accepts."""
    return _iana_names() | {"UTC"}


@cache
def _iana_names() -> frozenset[str]:
    return frozenset(available_timezones()) - {"localtime", "posixrules", "Factory"}
