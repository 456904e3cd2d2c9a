"""Times as the API accepts them: RFC 3339 text with a UTC offset, never a number.

Inside the domain, times are integer epoch milliseconds (UTC); these types are for the edges.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import AwareDatetime, BeforeValidator, ValidationInfo

from punctual.model.stored import is_stored

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
