"""Turning pydantic validation errors into Punctual's error details.

Both edges that validate input use this: the API (request bodies, query strings, headers) and
the job service (a PATCH merged into the stored spec is validated again as a whole). Each detail
names the field as a user wrote it (``target.url``, ``retry.backoff_s``), never pydantic's
internal location (``body.target.http.url``), and carries a message without pydantic's prefixes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from punctual.errors import InvalidInput
from punctual.model.targets import TARGET_KINDS

# Where a value came from in a request; the field path starts after it.
_SOURCES = frozenset({"body", "query", "path", "header", "cookie"})
# Discriminated unions put the tag in the location (target.http.url): drop it.
_TARGET_TAGS = frozenset(cls.model_fields["type"].default for cls in TARGET_KINDS)
# Messages that read better in the words of an API than of a Python library.
_MESSAGES = {
    "extra_forbidden": "unknown field (not part of the API)",
    "missing": "field required",
}
_PREFIXES = ("Value error, ", "Assertion failed, ")


def field_path(loc: Sequence[Any]) -> str:
    """The dotted field a pydantic error location points at (``"body"`` for the body as a whole)."""
    parts = [str(p) for p in loc]
    if parts and parts[0] in _SOURCES:
        source, parts = parts[0], parts[1:]
        if not parts:
            return source
        if source != "body":
            return parts[0]  # a parameter's name; "state.0" (a repeated query value) is just "state"
    kept: list[str] = []
    for i, part in enumerate(parts):
        if i > 0 and parts[i - 1] == "target" and part in _TARGET_TAGS:
            continue
        kept.append(part)
    return ".".join(kept) if kept else "body"


def detail_message(error: Mapping[str, Any]) -> str:
    """A readable message for one pydantic error."""
    kind = str(error.get("type", ""))
    if kind in _MESSAGES:
        return _MESSAGES[kind]
    message = str(error.get("msg", "invalid value"))
    for prefix in _PREFIXES:
        if message.startswith(prefix):
            return message[len(prefix) :]
    return message


def details_from_errors(errors: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """One ``{"field", "message"}`` per pydantic error, in order, without duplicates."""
    details: list[dict[str, str]] = []
    for error in errors:
        detail = {"field": field_path(error.get("loc", ())), "message": detail_message(error)}
        if detail not in details:
            details.append(detail)
    return details


def summary(details: Sequence[Mapping[str, str]], limit: int = 3) -> str:
    """One line naming the first few problems, e.g. ``"schedule: ...; timeout_s: ..."``."""
    shown = "; ".join(f"{d['field']}: {d['message']}" for d in details[:limit])
    more = len(details) - limit
    return shown + (f" (and {more} more)" if more > 0 else "")


def invalid_input(exc: ValidationError) -> InvalidInput:
    """The domain error for a failed model validation, with one detail per problem.

    When every problem comes from one kind of domain check (a bad cron expression raised as
    :class:`InvalidSchedule` inside a validator), the error keeps that kind's class and code.
    """
    return from_errors(exc.errors(include_url=False))


def from_errors(errors: Sequence[Mapping[str, Any]], lead: str = "invalid input") -> InvalidInput:
    """:func:`invalid_input` for a list of pydantic error dicts (as Powertools hands them over)."""
    details = details_from_errors(errors)
    kinds = {_domain_kind(error) for error in errors}
    kind = kinds.pop() if len(kinds) == 1 else None
    return (kind or InvalidInput)(f"{lead}: {summary(details)}", details=details)


def _domain_kind(error: Mapping[str, Any]) -> type[InvalidInput] | None:
    cause = getattr(error.get("ctx", {}).get("error"), "__cause__", None)
    return type(cause) if isinstance(cause, InvalidInput) else None
