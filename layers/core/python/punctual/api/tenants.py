"""``GET /limits`` (the caller's own limits and usage) and the admin routes ``/admin/tenants``.

A Powertools :class:`Router` included by ``punctual.api.app``; it shares the app's per-request
context (``services`` and ``owner``). The admin routes answer only owners listed in
``Settings.admin_principals`` (on AWS an IAM role ARN; locally an API key's owner); anyone else
gets 403, and on AWS the gateway's IAM authorization and resource policy stand in front of that.
"""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import BaseModel, ConfigDict, Field

from punctual.api import openapi
from punctual.api.caller import Services, caller
from punctual.errors import Forbidden
from punctual.port import Tenant
from punctual.tenancy import service
from punctual.tenancy.limits import LimitCache, Limits, defaults_from

router = Router()  # type: ignore[no-untyped-call]  # Powertools leaves __init__ unannotated

Limit = Annotated[int, Field(ge=1, le=service.MAX_LIMIT)]


class LimitsBody(BaseModel):
    """An owner's limits; null (or absent) means unlimited, or the deployment default where one is set."""

    max_jobs: int | None = Field(default=None, description="active + paused jobs; more: 409 limit_exceeded")
    max_runs_per_minute: int | None = Field(default=None, description="run starts per minute; more wait")
    max_concurrency: int | None = Field(default=None, description="runs executing at once; more wait")
    api_requests_per_second: int | None = Field(default=None, description="API requests; more: 429")
    weight: int = Field(default=1, description="share of the fair hand-out (embedded queue)")

    @classmethod
    def of(cls, limits: Limits | Tenant) -> LimitsBody:
        """The limits in force (:class:`Limits`), or as an operator set them (a :class:`Tenant` record)."""
        return cls(
            max_jobs=limits.max_jobs,
            max_runs_per_minute=limits.max_runs_per_minute,
            max_concurrency=limits.max_concurrency,
            api_requests_per_second=limits.api_requests_per_second,
            weight=limits.weight,
        )


class UsageBody(BaseModel):
    live_jobs: int = Field(description="active + paused jobs (what max_jobs bounds)")
    running: int | None = Field(description="runs holding a concurrency slot now (null: no max_concurrency)")
    runs_this_minute: int | None = Field(description="starts in the last 60 s (null: no max_runs_per_minute)")


class LimitsResponse(BaseModel):
    owner: str
    limits: LimitsBody = Field(description="the limits in force: the owner's own over the deployment defaults")
    usage: UsageBody


class TenantChange(BaseModel):
    """``PUT /admin/tenants``: the fields sent replace the owner's; null resets one to the default."""

    model_config = ConfigDict(extra="forbid")
    owner: Annotated[str, Field(min_length=1, max_length=512)]
    max_jobs: Limit | None = None
    max_runs_per_minute: Limit | None = None
    max_concurrency: Limit | None = None
    api_requests_per_second: Limit | None = None
    weight: Annotated[int, Field(ge=1, le=service.MAX_WEIGHT)] | None = None


class TenantResponse(BaseModel):
    owner: str
    limits: LimitsBody = Field(description="effective: the record over the deployment defaults")
    record: LimitsBody | None = Field(description="what an operator set (null: nothing; defaults apply)")

    @classmethod
    def of(cls, view: service.TenantView) -> TenantResponse:
        record = None if view.record is None else LimitsBody.of(view.record)
        return cls(owner=view.owner, limits=LimitsBody.of(view.limits), record=record)


class TenantList(BaseModel):
    items: list[TenantResponse]


@router.get(
    "/limits",
    operation_id="getLimits",
    tags=["limits"],
    summary="The caller's limits and current usage",
    responses=openapi.responses({200: ("Limits and usage", LimitsResponse)}, openapi.LIST_ERRORS),
)
def get_limits() -> LimitsResponse:
    services, owner = _caller()
    limits = _limits(services).get(owner)
    usage = service.usage(services.store, owner, limits, services.clock.now_ms())
    body = UsageBody(live_jobs=usage.live_jobs, running=usage.running, runs_this_minute=usage.runs_this_minute)
    return LimitsResponse(owner=owner, limits=LimitsBody.of(limits), usage=body)


@router.get(
    "/admin/tenants",
    operation_id="listTenants",
    tags=["admin"],
    summary="Admin: every owner with limits set, or one owner's limits (?owner=)",
    responses=openapi.responses({200: ("Tenants", TenantList)}, openapi.ADMIN_READ_ERRORS),
)
def list_tenants(
    owner: Annotated[str | None, Query(min_length=1, max_length=512, description="only this owner")] = None,
) -> TenantList:
    services = _admin()
    defaults = defaults_from(services.settings)
    if owner is not None:
        return TenantList(items=[TenantResponse.of(service.view(services.store, owner, defaults))])
    return TenantList(items=[TenantResponse.of(v) for v in service.list_views(services.store, defaults)])


@router.put(
    "/admin/tenants",
    operation_id="setTenant",
    tags=["admin"],
    summary="Admin: change one owner's limits (fields sent replace; null resets to the default)",
    responses=openapi.responses({200: ("The owner's limits", TenantResponse)}, openapi.ADMIN_CHANGE_ERRORS),
)
def set_tenant(body: TenantChange) -> TenantResponse:
    services = _admin()
    changes = {name: getattr(body, name) for name in body.model_fields_set if name != "owner"}
    service.set_tenant(services.store, body.owner, changes, services.clock.now_ms())
    return TenantResponse.of(service.view(services.store, body.owner, defaults_from(services.settings)))


# -- helpers ---------------------------------------------------------------------------------------


def _caller() -> tuple[Services, str]:
    return caller(router.context)


def _admin() -> Services:
    services, owner = _caller()
    if owner not in services.settings.admins:
        raise Forbidden("the admin routes are for operators (PUNCTUAL_ADMIN_PRINCIPALS), not for owners")
    return services


def _limits(services: Services) -> LimitCache:
    if services.limits is not None:
        return services.limits
    return LimitCache(services.store, defaults_from(services.settings), services.clock, ttl_ms=0)
