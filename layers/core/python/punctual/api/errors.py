"""The one place where errors become HTTP responses.

Every error body has the shape of :class:`~punctual.api.schemas.ErrorBody`:
``{"code": ..., "message": ..., "details": [{"field": ..., "message": ...}]}``.

Statuses:

====  =======================================================================================
400   malformed_json: the body is not JSON; number_out_of_range: a number overflows to
      infinity or an integer does not fit in 64 bits (``punctual.numbers``; details name the field)
401   unauthorized: no owner could be established (no or unknown API key, unsigned request)
403   forbidden: an admin route called by an owner that is not an admin principal
404   job_not_found, run_not_found (also for another owner's ids, and depends_on jobs), route_not_found
405   method_not_allowed: the path exists, the method does not (``Allow`` lists the methods)
409   invalid_transition, idempotency_key_reused, idempotency_key_in_use (``Retry-After``),
      concurrent_modification, has_dependents, limit_exceeded (the owner is at its max_jobs)
413   request_too_large: the body exceeds ``MAX_BODY_BYTES``; job_too_large: the job (payload,
      target, headers: the whole spec) exceeds ``punctual.model.MAX_JOB_BYTES``
415   unsupported_media_type: a body that is not ``application/json``
422   invalid_input and its kinds (invalid_schedule, invalid_timezone, invalid_id,
      invalid_cursor, target_refused): the request parsed but a value is wrong (or the body is
      not a JSON object, names a key twice, or the route does not take a query parameter);
      details name the fields
429   too_many_requests: over the owner's api_requests_per_second (``Retry-After`` says when)
500   internal_error: a bug or an unavailable dependency, never bad input
====  =======================================================================================
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError, ServiceError
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)

from punctual import ids
from punctual.errors import (
    Conflict,
    Forbidden,
    IdempotencyKeyInUse,
    InvalidCursor,
    InvalidInput,
    InvalidSchedule,
    InvalidTimezone,
    InvalidTransition,
    JobTooLarge,
    NotFound,
    PunctualError,
    Throttled,
    TooManyRequests,
    Unauthorized,
)
from punctual.jobs import checks, validation

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 256 * 1024  # a job is far smaller (payload <= 8 KiB); DynamoDB items stop at 400 KB


# -- transport-level errors (they exist only at the HTTP edge) -------------------------------


class MalformedJson(InvalidInput):
    code = "malformed_json"


class NumberOutOfRange(MalformedJson):
    """A JSON number no engine can keep exactly (non-finite, or an integer beyond 64 bits)."""

    code = "number_out_of_range"


class UnsupportedMediaType(InvalidInput):
    code = "unsupported_media_type"


class RequestTooLarge(InvalidInput):
    code = "request_too_large"


class RouteNotFound(NotFound):
    code = "route_not_found"


class MethodNotAllowed(PunctualError):
    code = "method_not_allowed"

    def __init__(self, message: str, allowed: list[str]) -> None:
        super().__init__(message)
        self.allowed = allowed


class InternalError(PunctualError):
    code = "internal_error"


# Most specific first: the first class an error is an instance of decides its status.
_STATUS: tuple[tuple[type[PunctualError], HTTPStatus], ...] = (
    (MalformedJson, HTTPStatus.BAD_REQUEST),
    (RequestTooLarge, HTTPStatus.REQUEST_ENTITY_TOO_LARGE),
    (JobTooLarge, HTTPStatus.REQUEST_ENTITY_TOO_LARGE),
    (UnsupportedMediaType, HTTPStatus.UNSUPPORTED_MEDIA_TYPE),
    (Unauthorized, HTTPStatus.UNAUTHORIZED),
    (Forbidden, HTTPStatus.FORBIDDEN),
    (TooManyRequests, HTTPStatus.TOO_MANY_REQUESTS),
    (NotFound, HTTPStatus.NOT_FOUND),
    (MethodNotAllowed, HTTPStatus.METHOD_NOT_ALLOWED),
    (InvalidTransition, HTTPStatus.CONFLICT),
    (Conflict, HTTPStatus.CONFLICT),
    (InvalidInput, HTTPStatus.UNPROCESSABLE_ENTITY),
    (Throttled, HTTPStatus.SERVICE_UNAVAILABLE),
)
# Errors raised from deep inside validation (a cron parser, a zone lookup) do not know which
# request field they were validating; in a request they can only come from these fields.
_DEFAULT_FIELD: tuple[tuple[type[PunctualError], str], ...] = (
    (InvalidSchedule, "schedule"),
    (InvalidTimezone, "timezone"),
    (InvalidCursor, "cursor"),
)


def status_for(exc: PunctualError) -> HTTPStatus:
    """The HTTP status of a domain error (500 for errors that are never the caller's fault)."""
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return HTTPStatus.INTERNAL_SERVER_ERROR


def error_body(exc: PunctualError) -> dict[str, Any]:
    """The JSON body for ``exc``: code, message, and details (always a list)."""
    field = exc.field or next((name for cls, name in _DEFAULT_FIELD if isinstance(exc, cls)), None)
    details = exc.details
    if not isinstance(details, list):
        details = [{"field": field, "message": exc.message}] if field else []
    return {"code": exc.code, "message": exc.message, "details": details}


def error_response(exc: PunctualError) -> Response[Any]:
    """A Powertools response for ``exc`` (what exception handlers return)."""
    status = status_for(exc)
    return Response(
        status_code=status.value,
        content_type=content_types.APPLICATION_JSON,
        body=error_body(exc),
        headers=_headers_for(exc),
    )


def lambda_response(exc: PunctualError) -> dict[str, Any]:
    """A Lambda proxy (REST v1) response for ``exc``, for errors found before routing (auth, size)."""
    headers = {"Content-Type": content_types.APPLICATION_JSON, **_headers_for(exc)}
    return {
        "statusCode": status_for(exc).value,
        "headers": headers,
        "multiValueHeaders": {name: [value] for name, value in headers.items()},
        "body": json.dumps(error_body(exc), separators=(",", ":")),
        "isBase64Encoded": False,
    }


def from_request_validation(exc: RequestValidationError) -> PunctualError:
    """The domain error for a Powertools validation failure: malformed JSON, bad fields, or a bug."""
    errors = list(exc.errors())
    if any(_loc(e)[:1] == ("response",) for e in errors):
        # Our own response did not match its model: a bug, never the caller's fault.
        logger.error("response failed validation: %s", errors)
        return InternalError("internal error: the response did not match its schema")
    malformed = next((e for e in errors if e.get("type") == "json_invalid"), None)
    if malformed is not None:
        reason = (malformed.get("ctx") or {}).get("error", "unreadable")
        return MalformedJson(f"request body is not valid JSON: {reason}", field="body")
    bad_id = next((e for e in errors if _loc(e)[:2] in _CHECKED_PARAMETERS), None)
    if bad_id is not None:  # the patterns are declared in the document; keep the check's own message
        try:
            _CHECKED_PARAMETERS[_loc(bad_id)[:2]](str(bad_id.get("input", "")))
        except InvalidInput as invalid:
            return invalid
    return validation.from_errors(errors, "invalid request")


_CHECKED_PARAMETERS: dict[tuple[Any, ...], Callable[[str], object]] = {
    ("path", "job_id"): ids.check_job_id,
    ("path", "run_id"): ids.parse_run_id,
    ("header", "idempotency-key"): checks.check_idempotency_key,
}


def register(app: APIGatewayRestResolver) -> None:
    """Install the exception handlers that turn every error into our error shape."""

    def _domain(exc: PunctualError) -> Response[Any]:
        if status_for(exc) >= HTTPStatus.INTERNAL_SERVER_ERROR:
            logger.error("%s: %s", exc.code, exc.message)
        return error_response(exc)

    def _invalid(exc: RequestValidationError) -> Response[Any]:
        return error_response(from_request_validation(exc))

    def _media(exc: RequestUnsupportedContentType) -> Response[Any]:
        return error_response(UnsupportedMediaType("send the body as JSON with Content-Type: application/json"))

    def _not_found(exc: NotFoundError) -> Response[Any]:
        method, path = app.current_event.http_method.upper(), app.context.get("_path", app.current_event.path)
        allowed = allowed_methods(app, path)
        if allowed and method not in allowed:
            return error_response(MethodNotAllowed(f"{method} is not allowed on {path}", allowed))
        return error_response(RouteNotFound(f"no route {method} {path}"))

    def _service(exc: ServiceError) -> Response[Any]:
        return Response(
            status_code=exc.status_code,
            content_type=content_types.APPLICATION_JSON,
            body={"code": "http_error", "message": exc.msg, "details": []},
        )

    def _unexpected(exc: Exception) -> Response[Any]:
        # Logged with the stack; the caller gets a generic message (no internals leak).
        logger.exception("unhandled error in the API")
        request_id = (app.current_event.raw_event.get("requestContext") or {}).get("requestId", "unknown")
        return error_response(InternalError(f"internal error (request id {request_id})"))

    # Powertools' decorators are untyped; registering by call keeps these functions typed.
    handlers: list[tuple[type[Exception], Callable[[Any], Response[Any]]]] = [
        (PunctualError, _domain),
        (RequestValidationError, _invalid),
        (RequestUnsupportedContentType, _media),
        (NotFoundError, _not_found),
        (ServiceError, _service),
        (Exception, _unexpected),
    ]
    for exc_class, handler in handlers:
        app.exception_handler(exc_class)(handler)


def allowed_methods(app: APIGatewayRestResolver, path: str) -> list[str]:
    """The methods with a route matching ``path`` (empty: no such path). A path a static route names
    is that route's alone, though a dynamic one matches it too (``/runs/replay`` is no ``/runs/{run_id}``:
    no id is a word)."""
    static = {r.method for r in app._static_routes if r.rule.match(path)}
    return sorted(static or {r.method for r in app._dynamic_routes if r.rule.match(path)})


def _headers_for(exc: PunctualError) -> dict[str, str]:
    if isinstance(exc, Unauthorized):
        return {"WWW-Authenticate": 'Bearer realm="punctual"'}
    if isinstance(exc, MethodNotAllowed):
        return {"Allow": ", ".join(exc.allowed)}
    if isinstance(exc, TooManyRequests | IdempotencyKeyInUse):
        return {"Retry-After": str(exc.retry_after_s)}
    return {}


def _loc(error: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(error.get("loc", ()))
