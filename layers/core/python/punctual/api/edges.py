"""Edge checks made before routing and validation, in the order a gateway makes them.

Who is calling (401), body size (413), media type (415), UTF-8 and strict JSON (400), and
bodiless action routes. :mod:`punctual.api.app` calls :func:`admit` and :func:`json_media` for
every event and parses bodies with :func:`strict_json`; the routes never see a body these refuse.
"""

from __future__ import annotations

import base64
import json
import re
from collections import deque
from collections.abc import Mapping
from typing import Any

from punctual import numbers
from punctual.api import auth, errors
from punctual.errors import InvalidInput, Unauthorized

PUBLIC_PATHS = frozenset({"/openapi.json", "/docs"})
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
MAX_JSON_DEPTH = 32  # a request body's nesting (a job's payload sits two levels down)


def strict_json(text: str) -> Any:
    """json.loads, refusing what cannot be stored: NaN/Infinity (not JSON either), nesting deeper
    than ``MAX_JSON_DEPTH`` (pydantic's serializer fails past 255 levels, Python's parser near 1000),
    strings escaping a lone surrogate (``"\\ud800"``: JSON text, but not Unicode), numbers out of
    range (400 naming the field: ``punctual.numbers``), a body that is not an object (422) and an
    object that names a key twice (422 naming it: RFC 8259 leaves the meaning to each parser, and
    "the last one wins" would silently drop what the client sent first)."""

    def refuse(name: str) -> Any:
        raise json.JSONDecodeError(f"{name} is not valid JSON", text, 0)

    objects = _Objects()
    try:
        value = json.loads(
            text,
            parse_constant=refuse,
            parse_int=numbers.parse_int,
            parse_float=numbers.parse_float,
            object_pairs_hook=objects,
        )
    except RecursionError:
        value = None
    else:
        if not isinstance(value, dict):
            raise InvalidInput(f"the body must be a JSON object, not {_json_kind(value)}", field="body")
        if not _nests_deeper_than(value, MAX_JSON_DEPTH):
            twice = _first_duplicate(value) if objects.duplicated else None
            if twice is not None:
                path, key = twice
                raise InvalidInput(f"{path}: the key {key!r} appears twice in one object", field=path)
            bad = numbers.first_out_of_range(value)
            if bad is not None:
                raise errors.NumberOutOfRange(
                    f"{bad[0]}: the number {bad[1]} is out of range (accepted: {numbers.RANGE})", field=bad[0]
                )
            try:
                json.dumps(value, ensure_ascii=False).encode()
            except UnicodeEncodeError:
                raise json.JSONDecodeError("a string is not valid Unicode (a lone surrogate)", text, 0) from None
            return value
    raise json.JSONDecodeError(f"nested deeper than {MAX_JSON_DEPTH} levels", text, 0)


class _Duplicated(dict[str, Any]):
    """A JSON object that named a key more than once (the last value kept, as json.loads does)."""

    duplicate: str = ""


class _Objects:
    """json.loads' object_pairs_hook: builds each object as a dict, marking one that names a key
    twice; ``duplicated`` tells whether any did (so clean bodies are not walked again)."""

    def __init__(self) -> None:
        self.duplicated = False

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        value = dict(pairs)
        if len(value) == len(pairs):
            return value
        self.duplicated = True
        marked = _Duplicated(value)
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                marked.duplicate = key
                break
            seen.add(key)
        return marked


def _first_duplicate(value: Any) -> tuple[str, str] | None:
    """(the dotted path of the key, the key) of the first key some object of ``value`` names twice."""
    pending: deque[tuple[Any, str]] = deque([(value, "")])
    while pending:  # iterative, like _nests_deeper_than (the depth is bounded before this runs)
        item, path = pending.popleft()
        if isinstance(item, _Duplicated):
            return (f"{path}.{item.duplicate}" if path else item.duplicate), item.duplicate
        if isinstance(item, dict):
            pending.extend((child, f"{path}.{key}" if path else str(key)) for key, child in item.items())
        elif isinstance(item, list):
            pending.extend((child, f"{path}.{i}" if path else str(i)) for i, child in enumerate(item))
    return None


def _json_kind(value: Any) -> str:
    kinds = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")


def _nests_deeper_than(value: Any, limit: int) -> bool:
    pending = [(value, 1)]
    while pending:  # iterative: a recursive walk would fail on exactly the input it guards against
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


# The callback routes act for no owner: their token decides (punctual.api.callbacks), and an owner's
# credentials, sent or not, change nothing there.
CALLBACK_PATH = re.compile(r"^/runs/[^/]+/(heartbeat|complete)/?$")


def admit(event: Mapping[str, Any]) -> str | None:
    """Checks made before routing, in the order a gateway makes them: identity, then the body.
    Returns the owner (None on the public paths and the callback routes)."""
    path = str(event.get("path") or "/")
    owner = None if CALLBACK_PATH.match(path) else auth.owner_from_event(event)
    if owner is None and not CALLBACK_PATH.match(path) and (path.rstrip("/") or "/") not in PUBLIC_PATHS:
        raise Unauthorized(
            "authentication required: send Authorization: Bearer <API key> (local) or sign the request (AWS IAM)"
        )
    if str(event.get("httpMethod", "")).upper() in _BODY_METHODS:
        _check_body(event)
    return owner


def _check_body(event: Mapping[str, Any]) -> None:
    """Size (413), then media type (415), then that a JSON body is UTF-8 text (400)."""
    body = event.get("body") or ""
    try:
        # Gateways send binary bodies base64-encoded; JSON must be UTF-8 text (RFC 8259).
        raw = base64.b64decode(body, validate=True) if event.get("isBase64Encoded") else body.encode()
    except ValueError:  # binascii.Error
        raise errors.MalformedJson("the body is marked base64 but does not decode", field="body") from None
    if len(raw) > errors.MAX_BODY_BYTES:
        raise errors.RequestTooLarge(
            f"the body is {len(raw)} bytes; the limit is {errors.MAX_BODY_BYTES}", field="body"
        )
    media = _media_type(event)
    if raw and media and not (media == "application/json" or media.endswith("+json")):
        raise errors.UnsupportedMediaType(
            f"the body must be JSON (Content-Type: application/json), not {media}", field="Content-Type"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise errors.MalformedJson("the body is not UTF-8 text", field="body") from None
    if _ACTION_PATH.match(str(event.get("path") or "")):
        _check_empty_action_body(text)


# POST /jobs/{id}/pause|resume|trigger take no body: anything but nothing or {} is refused rather
# than silently ignored (a client sending options there would believe they were applied).
_ACTION_PATH = re.compile(r"^/jobs/[^/]+/(pause|resume|trigger)/?$")


def _check_empty_action_body(text: str) -> None:
    if not text.strip():
        return
    try:
        value = strict_json(text)
    except json.JSONDecodeError as exc:
        raise errors.MalformedJson(f"request body is not valid JSON: {exc.msg}", field="body") from None
    if value != {}:
        raise InvalidInput("this action takes no body (send none, or {})", field="body")


def _media_type(event: Mapping[str, Any]) -> str:
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    return headers.get("content-type", "").split(";")[0].strip().lower()


def json_media(event: Mapping[str, Any]) -> Mapping[str, Any]:
    """``event`` with a ``+json`` media type (e.g. application/merge-patch+json) read as JSON.

    Powertools parses only ``application/json`` bodies as JSON; a structured-syntax ``+json``
    type is JSON too (RFC 6839), and merge-patch is what PATCH bodies are.
    """
    media = _media_type(event)
    if not media.endswith("+json"):
        return event
    headers = {k: v for k, v in (event.get("headers") or {}).items() if str(k).lower() != "content-type"}
    multi = {k: v for k, v in (event.get("multiValueHeaders") or {}).items() if str(k).lower() != "content-type"}
    headers["Content-Type"] = "application/json"
    multi["Content-Type"] = ["application/json"]
    return {**event, "headers": headers, "multiValueHeaders": multi}
