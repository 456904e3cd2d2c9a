"""What the generated OpenAPI document says beyond the routes' signatures.

Powertools generates the document from the routes (``APIGatewayRestResolver.get_openapi_schema``).
Its default error response is a 422 with its own body, which is not what we return, so every
route declares its statuses here, each error with our :class:`ErrorBody` schema: the document
lists exactly the statuses a route can answer with.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler.openapi.models import APIKey, APIKeyIn, HTTPBearer, SecurityScheme
from pydantic import BaseModel

from punctual.api.schemas import ErrorBody

TITLE = "Punctual API"
DESCRIPTION = """\
Schedule jobs once (`run_at`) or on a cron `schedule`; every run executes at least once and
leaves a queryable history with its attempts.

**Authentication.** Every request acts for one owner. On AWS the owner is the API Gateway
authorizer's principal (IAM SigV4 by default). Locally send `Authorization: Bearer <API key>`
(`punctual dev` prints one). One owner never sees another's jobs or runs: they are 404.

**Errors** always have the shape `{"code", "message", "details": [{"field", "message"}]}`.
Bad input is a 4xx and changes nothing.
"""

# Why each status happens, per error status (the codes a client can branch on).
_ERRORS: dict[int, str] = {
    400: "The body is not JSON, not UTF-8, or nested deeper than 32 levels (code malformed_json), or a "
    "number overflows to infinity or is an integer beyond 64 bits (number_out_of_range; details name it).",
    401: "No valid credentials (code unauthorized); the callback routes: no valid X-Punctual-Callback-Token"
    " for this run (invalid_callback_token).",
    403: "The caller is not an admin principal (code forbidden): the admin routes only; the callback routes:"
    " the token's attempt has its outcome already (attempt_completed: a completion is accepted once).",
    404: "No such job, run or calendar for this owner (job_not_found, run_not_found, calendar_not_found; "
    "also a depends_on job that is not the owner's).",
    409: "The job's state does not allow this (invalid_transition), the Idempotency-Key was used for a "
    "different body (idempotency_key_reused), concurrent edits (concurrent_modification), or other jobs "
    "depend on the job being deleted (has_dependents; delete with force=true), or the owner is at its "
    "max_jobs (limit_exceeded), or jobs or calendars name the calendar being deleted (calendar_in_use); the "
    "callback routes: the token's attempt timed out (attempt_timed_out) or is no longer the run's "
    "(attempt_superseded: a newer attempt, or the run was cancelled).",
    413: "The body is larger than allowed (request_too_large), or the whole job (payload, target and "
    "headers) is over 10 KiB as JSON (job_too_large).",
    415: "The body is not application/json (unsupported_media_type).",
    422: "The body is not a JSON object or an object in it names a key twice, a query parameter is not "
    "one the route takes, or a value is invalid (invalid_input, invalid_schedule, invalid_timezone, "
    "invalid_id, invalid_cursor, dependency_cycle, target_refused: a target no request can be built "
    "from or that may not be reached; too_many_runs: a replay beyond its bound); details name the fields.",
    429: "More requests than the owner's api_requests_per_second (too_many_requests); retry after Retry-After seconds.",
    500: "Internal error (internal_error); never caused by input.",
    503: "The storage service is throttling (throttled); retry the same request.",
}
# The error statuses of each kind of route (every route lists its own explicitly in app.py).
LIST_ERRORS = (401, 422, 429, 500, 503)  # GET a collection: bad filters or cursor; 503: storage throttled, retry
READ_ERRORS = (401, 404, 422, 429, 500)  # GET or DELETE one item: bad id, unknown or foreign id
# POST without a body: the edge still checks any body sent (400, 413, 415); the state may refuse (409)
ACTION_ERRORS = (400, 401, 404, 409, 413, 415, 422, 429, 500)
CREATE_ERRORS = (400, 401, 404, 409, 413, 415, 422, 429, 500)  # POST /jobs: the body is parsed; 404: depends_on
DELETE_ERRORS = (401, 404, 409, 422, 429, 500)  # DELETE a job: 409 while other jobs depend on it
CHANGE_ERRORS = (400, 401, 404, 409, 413, 415, 422, 429, 500)  # PATCH one item
# POST /runs/replay: the body is parsed; 404: a job named that is not the caller's; 409: a job named is deleted
REPLAY_ERRORS = (400, 401, 404, 409, 413, 415, 422, 429, 500)
# The admin routes: the caller must be an admin principal (403), bodies are parsed
ADMIN_READ_ERRORS = (401, 403, 404, 422, 429, 500)
ADMIN_CHANGE_ERRORS = (400, 401, 403, 413, 415, 422, 429, 500)
# The callback routes: the token decides (401, 403), the attempt may be over (409), the run gone (404)
CALLBACK_ERRORS = (400, 401, 403, 404, 409, 413, 415, 422, 500)
CALLBACK_SCHEME = "callbackToken"

SECURITY_SCHEMES: dict[str, SecurityScheme] = {
    "sigv4": APIKey(
        name="Authorization",
        in_=APIKeyIn.header,
        description="AWS: IAM SigV4-signed requests (API Gateway IAM authorization).",
    ),
    "bearer": HTTPBearer(
        description="Local server: an API key mapped to an owner (PUNCTUAL_API_KEYS; punctual dev prints one).",
    ),
    "callbackToken": APIKey(
        name="X-Punctual-Callback-Token",
        in_=APIKeyIn.header,
        description="The callback routes only: the token an attempt of a completion callback job carried.",
    ),
}
SECURITY: list[dict[str, list[str]]] = [{"sigv4": []}, {"bearer": []}]


# OpenAPI links: where the id in a response can be used next (clients and schemathesis's stateful
# phase follow them from a created job to every operation on it).
JOB_LINKS: dict[str, Any] = {
    name: {"operationId": operation, "parameters": {"job_id": "$response.body#/id"}}
    for name, operation in (
        ("GetJob", "getJob"),
        ("UpdateJob", "updateJob"),
        ("DeleteJob", "deleteJob"),
        ("PauseJob", "pauseJob"),
        ("ResumeJob", "resumeJob"),
        ("TriggerJob", "triggerJob"),
        ("ListRuns", "listRuns"),
        ("PreviewJob", "previewJob"),
    )
}
RUN_LINKS: dict[str, Any] = {"GetRun": {"operationId": "getRun", "parameters": {"run_id": "$response.body#/run_id"}}}


def responses(
    success: dict[int, tuple[str, type[BaseModel] | None]],
    errors: tuple[int, ...],
    links: dict[str, Any] | None = None,
) -> dict[int, Any]:
    """The ``responses=`` of a route: its successes (status -> description, model) and its errors;
    ``links`` are attached to every success that has a body."""
    documented: dict[int, Any] = {}
    for status, (description, model) in success.items():
        # No model: no body (204). An explicit empty content keeps Powertools from inventing one.
        content = {"application/json": {"model": model}} if model is not None else {}
        documented[status] = {"description": description, "content": content}
        if links and model is not None:
            documented[status]["links"] = links
    for status in errors:
        documented[status] = {
            "description": _ERRORS.get(status, HTTPStatus(status).phrase),
            "content": {"application/json": {"model": ErrorBody}},
        }
    return documented
