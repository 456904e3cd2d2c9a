"""Where a run is delivered: one model per target type, and ``Target``, their union by ``type``."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationInfo, field_validator, model_validator

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
    type: Literal["http"] = Field("http", description="optional: a target without a type is http")
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
    # Left out of the stored and shown target while unset: every run reads the job's target, and a
    # small job's spec should stay small.
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
        for kind, named in (("headers", self.headers), ("secret_headers", self.secret_headers)):
            lower = [name.lower() for name in named]
            twice = sorted({name for name in lower if lower.count(name) > 1})
            if twice:  # names are case-insensitive: X-A and x-a would go out as two headers
                raise ValueError(f"a header is named twice in {kind} (names ignore case): {', '.join(twice)}")
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


def _type_required(schema: dict[str, Any]) -> None:
    """In the document, a kind other than ``http`` must name its ``type`` (see :func:`target_kind`)."""
    schema["required"] = ["type", *[name for name in schema.get("required", []) if name != "type"]]


# The kinds other than http: their ``type`` is required in the document (a target without one is http).
NAMED_KIND = ConfigDict(**STRICT, json_schema_extra=_type_required)

_ARN = r"^arn:aws[a-zA-Z-]*:"
_LAMBDA_ARN = _ARN + r"lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9$_-]+)?$"
_STATE_MACHINE_ARN = _ARN + r"states:[a-z0-9-]+:\d{12}:stateMachine:[A-Za-z0-9_-]{1,80}$"


def _ascii(value: str, info: ValidationInfo) -> str:
    """Refuse non-ASCII text where the pattern's ``\\d`` (Unicode digits in pydantic's regex engine,
    ASCII ones in the document's JSON Schema) would let full-width digits through: AWS refuses
    such an ARN or queue URL on every attempt. Not applied to stored documents (``is_stored``)."""
    if not is_stored(info) and not value.isascii():
        raise ValueError("must be ASCII (an AWS ARN or queue URL never holds other characters)")
    return value


class LambdaTarget(BaseModel):
    """Invoke a Lambda function (asynchronously by default) with the run as the event."""

    model_config = NAMED_KIND
    type: Literal["lambda"] = "lambda"
    function_arn: Annotated[str, Field(pattern=_LAMBDA_ARN)]
    invocation: Literal["event", "request_response"] = "event"
    _ascii_arn = field_validator("function_arn")(_ascii)


class SqsTarget(BaseModel):
    """Send the run as a message to an SQS queue."""

    model_config = NAMED_KIND
    type: Literal["sqs"] = "sqs"
    queue_url: Annotated[
        str,
        Field(
            pattern=r"^https://[^\s]+/\d{12}/[A-Za-z0-9_-]{1,80}(\.fifo)?$",
            # the document states the ASCII rule of _ascii (the pattern above stays as stored jobs were written)
            json_schema_extra={"pattern": r"^https://[!-~]+/[0-9]{12}/[A-Za-z0-9_-]{1,80}(\.fifo)?$"},
        ),
    ]
    _ascii_url = field_validator("queue_url")(_ascii)


class StepFunctionsTarget(BaseModel):
    """Start a state machine execution named by the run id (idempotent by construction)."""

    model_config = NAMED_KIND
    type: Literal["stepfunctions"] = "stepfunctions"
    state_machine_arn: Annotated[str, Field(pattern=_STATE_MACHINE_ARN)]
    _ascii_arn = field_validator("state_machine_arn")(_ascii)


# PutEvents' EventBusName: a bus name or ARN (partner buses: aws.partner/...).
_EVENT_BUS = r"^(arn:aws[a-zA-Z-]*:events:[a-z0-9-]+:[0-9]{12}:event-bus/)?[/._A-Za-z0-9-]+$"


class EventBridgeTarget(BaseModel):
    """Put the run as an event on an event bus."""

    model_config = NAMED_KIND
    type: Literal["eventbridge"] = "eventbridge"
    # the pattern is checked on input only (stored jobs written before it keep loading)
    event_bus: Annotated[str, Field(min_length=1, max_length=1600, json_schema_extra={"pattern": _EVENT_BUS})] = (
        "default"
    )
    source: Annotated[str, Field(min_length=1, max_length=256)] = "punctual"
    detail_type: Annotated[str, Field(min_length=1, max_length=128)] = "punctual.run"

    @field_validator("event_bus")
    @classmethod
    def _bus_name(cls, value: str, info: ValidationInfo) -> str:
        if not is_stored(info) and not re.fullmatch(_EVENT_BUS, value):
            raise ValueError("event_bus must be an event bus name (letters, digits, / . _ -) or its ARN")
        return value


def target_kind(value: Any) -> Any:
    """The kind of target ``value`` is: its ``type``, and ``http`` when it has none (the default the
    document states; the other kinds name theirs, which their schemas require)."""
    if isinstance(value, dict):
        return value.get("type", "http")
    return getattr(value, "type", None)


TARGET_KINDS = (HttpTarget, LambdaTarget, SqsTarget, StepFunctionsTarget, EventBridgeTarget)

Target = Annotated[
    Annotated[HttpTarget, Tag("http")]
    | Annotated[LambdaTarget, Tag("lambda")]
    | Annotated[SqsTarget, Tag("sqs")]
    | Annotated[StepFunctionsTarget, Tag("stepfunctions")]
    | Annotated[EventBridgeTarget, Tag("eventbridge")],
    Discriminator(
        target_kind,
        custom_error_type="invalid_target_type",
        custom_error_message=(
            "target must be an object whose type is 'http' (the default when absent), 'lambda', 'sqs', "
            "'stepfunctions' or 'eventbridge'"
        ),
    ),
]
