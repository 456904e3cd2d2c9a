"""``POST /runs/{run_id}/heartbeat`` and ``POST /runs/{run_id}/complete``: a callback job's target
reports on the attempt it accepted (HTTP 202), with that attempt's token
(``X-Punctual-Callback-Token``, as its call carried it; ``punctual.runs.tokens``).

The token alone authorizes these two routes, for that run and attempt only: an API key, or an IAM
identity, does not (an owner cannot complete its own runs), and the token opens no other route. On
AWS the two routes sit behind a Lambda authorizer that checks the token (``functions/callback_authorizer``);
every other route stays IAM. The writes are ``punctual.execution.callbacks``.

A Powertools :class:`Router`; ``punctual.api.app`` includes it and shares its per-request context.
"""

from __future__ import annotations

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path
from pydantic import BaseModel, ConfigDict, Field

from punctual import ids
from punctual.api import openapi
from punctual.api.caller import callbacks_of
from punctual.api.schemas import IsoTime
from punctual.clock import iso
from punctual.execution.callbacks import Callbacks
from punctual.model import MAX_EXCERPT_CHARS, MAX_PROGRESS_CHARS, Run, RunState
from punctual.runs import tokens
from punctual.runs.callbacks import Report

router = Router()  # type: ignore[no-untyped-call]  # Powertools leaves __init__ unannotated

RunId = Annotated[str, Path(description="run_<32 hex>_<scheduled epoch ms>", pattern=ids.RUN_ID_PATTERN)]
Token = Annotated[
    str | None,
    Header(
        alias=tokens.TOKEN_HEADER,
        description="the attempt's callback token, exactly as its call carried it",
        examples=["pct1.1.0123456789abcdef.0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"],
    ),
]
SECURITY: list[dict[str, list[str]]] = [{openapi.CALLBACK_SCHEME: []}]


class HeartbeatRequest(BaseModel):
    """A heartbeat: the attempt is still at work (its deadline moves on), with an optional note."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)
    progress: Annotated[str, Field(max_length=MAX_PROGRESS_CHARS)] | None = Field(
        default=None, description="a progress note, shown on the run until the next heartbeat", examples=["42 %"]
    )


NO_NOTE = HeartbeatRequest()  # a heartbeat without a body (or with {})


class CompleteRequest(BaseModel):
    """The end of the attempt the target accepted."""

    model_config = ConfigDict(
        extra="forbid",
        str_strip_whitespace=True,
        json_schema_extra={"examples": [{"state": "succeeded", "result": "report 2027-01 written (812 rows)"}]},
    )
    state: Literal["succeeded", "failed"] = Field(description="how the work ended")
    result: Annotated[str, Field(max_length=MAX_EXCERPT_CHARS)] | None = Field(
        default=None, description="an excerpt of the result, kept in the attempt's log (its response_excerpt)"
    )
    retryable: bool = Field(
        default=True,
        strict=True,  # a JSON boolean: "no" or 0 is 422, as "30" is for an integer
        description="failed only: whether the run may be tried again (the job's max_retries and backoff"
        " decide); false ends it failed",
    )


class CallbackResponse(BaseModel):
    """The run as the callback left it."""

    run_id: str
    attempt: int
    state: RunState = Field(description="accepted after a heartbeat; after a completion the run's new state")
    heartbeat_deadline_at: IsoTime | None = Field(
        description="accepted: the attempt times out unless a heartbeat or the completion comes by then"
    )

    @classmethod
    def of(cls, run: Run) -> CallbackResponse:
        accepted = run.state is RunState.ACCEPTED
        return cls(
            run_id=run.run_id,
            attempt=run.attempt,
            state=run.state,
            heartbeat_deadline_at=iso(run.lease_expires_at) if accepted else None,
        )


@router.post(
    "/runs/<run_id>/heartbeat",
    operation_id="heartbeatRun",
    tags=["callbacks"],
    summary="Keep an accepted attempt alive (its callback token only): its deadline moves on",
    security=SECURITY,
    responses=openapi.responses({200: ("The heartbeat was recorded", CallbackResponse)}, openapi.CALLBACK_ERRORS),
)
def heartbeat(
    run_id: RunId, token: Token = None, body: Annotated[HeartbeatRequest, Body()] = NO_NOTE
) -> CallbackResponse:
    return CallbackResponse.of(_callbacks().heartbeat(run_id, token, body.progress))


@router.post(
    "/runs/<run_id>/complete",
    operation_id="completeRun",
    tags=["callbacks"],
    summary="End an accepted attempt (its callback token only), once: succeeded, or failed",
    security=SECURITY,
    responses=openapi.responses({200: ("The completion was recorded", CallbackResponse)}, openapi.CALLBACK_ERRORS),
)
def complete(run_id: RunId, body: CompleteRequest, token: Token = None) -> CallbackResponse:
    report = Report(succeeded=body.state == "succeeded", result=body.result, retryable=body.retryable)
    return CallbackResponse.of(_callbacks().complete(run_id, token, report))


def _callbacks() -> Callbacks:
    """The callbacks of the current request's services (the routes act for no owner)."""
    return callbacks_of(router.context)
