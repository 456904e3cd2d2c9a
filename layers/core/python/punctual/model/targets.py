"""Where a run is delivered: one model per target type, and ``Target``, their union by ``type``."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from punctual.model.bounds import MAX_HEADERS, MAX_SECRET_CHARS, REDACTED, STRICT
from punctual.model.stored import is_stored


class Signatures(StrEnum):
    """Which signatures the ``Punctual-Signature`` header of an HTTP attempt carries (docs/api.md, "Signing")."""

    # v2 alone: it covers the request (method, host, path and query, job), so a captured call
    # cannot be replayed against another endpoint of the same owner.
    V2 = "v2"
    # v2 and v1 (which covers only the run id and the body), for receivers that verify v1 alone.
    # What a job without ``signature`` gets until 0.2.0 (punctual.execution.targets.signing).
    V1_V2 = "v1+v2"


class HttpTarget(BaseModel):
    """POST (or another method) the payload to a URL, with ``Idempotency-Key: <run_id>``."""

    model_config = STRICT
    type: Literal["http"] = "http"
    url: Annotated[str, Field(min_length=8, max_length=2048, pattern=r"^https?://[^\s]+$")]
    method: Literal["POST", "PUT", "PATCH", "GET", "DELETE"] = "POST"
    headers: dict[Annotated[str, Field(min_length=1, max_length=128)], Annotated[str, Field(max_length=4096)]] = Field(
        default_factory=dict, max_length=MAX_HEADERS
    )
    # Write-only (credentials: Authorization, API keys). Stored sealed by the engine's keys
    # (Engine.keys: KMS on AWS, a local key file on the embedded engine), shown as REDACTED, opened
    # only by the worker for the request, never logged. In a PATCH, a value of REDACTED keeps the
    # stored secret of that name.
    secret_headers: dict[
        Annotated[str, Field(min_length=1, max_length=128)], Annotated[str, Field(min_length=1, max_length=8192)]
    ] = Field(
        default_factory=dict,
        max_length=MAX_HEADERS,
        description=f"write-only headers (credentials), each value at most {MAX_SECRET_CHARS} characters; "
        f"shown as {REDACTED!r}; in a PATCH, {REDACTED!r} keeps the stored value",
    )
    # Left out of the stored and shown target while unset: every claim rewrites the job's item,
    # and a job under 1 KB should stay under it.
    signature: Signatures | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="the signatures each attempt carries: v2 (method, host, path and query, job, run and body) "
        "alone, or v1+v2 for receivers that verify only v1 (run and body); unset: v1+v2 until 0.2.0, "
        "then v2 (docs/api.md, Signing)",
    )

    def redacted(self) -> HttpTarget:
        """This target as the API shows it: every secret header's value replaced by REDACTED."""
        return self.model_copy(update={"secret_headers": dict.fromkeys(self.secret_headers, REDACTED)})

    @model_validator(mode="after")
    def _header_names_once(self, info: ValidationInfo) -> HttpTarget:
        if is_stored(info):
            return self
        both = {name.lower() for name in self.headers} & {name.lower() for name in self.secret_headers}
        if both:
            raise ValueError(f"a header is either plain or secret, not both: {', '.join(sorted(both))}")
        if len(self.headers) + len(self.secret_headers) > MAX_HEADERS:
            raise ValueError(f"at most {MAX_HEADERS} headers, plain and secret together")
        return self

    @field_validator("url")
    @classmethod
    def _parsable(cls, value: str, info: ValidationInfo) -> str:
        if is_stored(info):
            return value
        try:
            host = urlsplit(value).hostname
        except ValueError as exc:  # e.g. an unclosed IPv6 literal: https://[::1
            raise ValueError(f"url is not a valid URL: {exc}") from exc
        if not host:
            raise ValueError("url must name a host")
        return value


_ARN = r"^arn:aws[a-zA-Z-]*:"
_LAMBDA_ARN = _ARN + r"lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9$_-]+)?$"
_STATE_MACHINE_ARN = _ARN + r"states:[a-z0-9-]+:\d{12}:stateMachine:[A-Za-z0-9_-]{1,80}$"


class LambdaTarget(BaseModel):
    """Invoke a Lambda function (asynchronously by default) with the run as the event."""

    model_config = STRICT
    type: Literal["lambda"] = "lambda"
    function_arn: Annotated[str, Field(pattern=_LAMBDA_ARN)]
    invocation: Literal["event", "request_response"] = "event"


class SqsTarget(BaseModel):
    """Send the run as a message to an SQS queue."""

    model_config = STRICT
    type: Literal["sqs"] = "sqs"
    queue_url: Annotated[str, Field(pattern=r"^https://[^\s]+/\d{12}/[A-Za-z0-9_-]{1,80}(\.fifo)?$")]


class StepFunctionsTarget(BaseModel):
    """Start a state machine execution named by the run id (idempotent by construction)."""

    model_config = STRICT
    type: Literal["stepfunctions"] = "stepfunctions"
    state_machine_arn: Annotated[str, Field(pattern=_STATE_MACHINE_ARN)]


class EventBridgeTarget(BaseModel):
    """Put the run as an event on an event bus."""

    model_config = STRICT
    type: Literal["eventbridge"] = "eventbridge"
    event_bus: Annotated[str, Field(min_length=1, max_length=1600)] = "default"
    source: Annotated[str, Field(min_length=1, max_length=256)] = "punctual"
    detail_type: Annotated[str, Field(min_length=1, max_length=128)] = "punctual.run"


Target = Annotated[
    HttpTarget | LambdaTarget | SqsTarget | StepFunctionsTarget | EventBridgeTarget,
    Field(discriminator="type"),
]
