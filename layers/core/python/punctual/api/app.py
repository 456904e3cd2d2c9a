"""The HTTP API: Powertools routes over the job service, identical on Lambda and locally.

Routes are thin: parse (Powertools validates against the pydantic models), call one function of
``punctual.jobs.service``, ``punctual.jobs.lifecycle`` or ``punctual.jobs.runs``, shape the
response. Errors are mapped in ``punctual.api.errors`` only. What a request needs is
:class:`~punctual.api.caller.Services`.

:func:`handle` is the one entry point (the Lambda handler and the local server both call it):

1. edge checks that must come before routing and validation (``punctual.api.edges``): who is
   calling (401), body size (413) and media type (415);
2. the request is resolved with the caller's owner and the engine in the resolver's context.

Requests run at once: each has its own resolver state (``punctual.api.resolver``), so one owner's
slow request (a large dependency graph) never holds up another's. On Lambda an execution
environment serves one request at a time anyway; ``punctual api`` serves each on a thread.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from functools import lru_cache
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.models import Server
from aws_lambda_powertools.event_handler.openapi.params import Header, Path, Query

from punctual import __version__, ids
from punctual.api import alerts, calendars, callbacks, edges, errors, openapi, preview, replay, signing, stats, tenants
from punctual.api.caller import Services, caller
from punctual.api.graph_schemas import JobGraph
from punctual.api.resolver import ConcurrentResolver
from punctual.api.schemas import JobCreate, JobPage, JobPatch, JobResponse, RunPage, RunResponse
from punctual.clock import from_datetime
from punctual.dependencies import graph as dependency_graph
from punctual.errors import PunctualError
from punctual.execution.targets.policy import TargetPolicy
from punctual.jobs import checks, lifecycle
from punctual.jobs import runs as job_runs
from punctual.jobs import service as jobs
from punctual.metrics import RUNS_DISPATCHED
from punctual.model import AwareRfc3339, Job, JobStatus, RunState
from punctual.port import RunQuery

_DOCUMENT = threading.Lock()  # the OpenAPI document is generated once, by one request

# Ids carry their patterns: a malformed id is 422 invalid_id, a well-formed one that does not
# exist (or is another owner's) is 404 (docs/decisions/0064).
JobId = Annotated[
    str,
    Path(
        description="job_ followed by 32 hex digits",
        pattern=ids.JOB_ID_PATTERN,
        examples=["job_0123456789abcdef0123456789abcdef"],
    ),
]
RunId = Annotated[str, Path(description="run_<32 hex>_<scheduled epoch ms>", pattern=ids.RUN_ID_PATTERN)]
Limit = Annotated[int, Query(ge=1, le=checks.MAX_PAGE, description="page size")]
Cursor = Annotated[str | None, Query(max_length=2048, description="next_cursor of the previous page")]


def handle(event: Mapping[str, Any], context: Any, services: Services) -> dict[str, Any]:
    """Answer one API Gateway REST (v1) proxy event with a proxy response (thread-safe)."""
    try:
        owner = edges.admit(event)
        if owner is not None and services.api_rate is not None:
            services.api_rate.check(owner)  # 429 before any work: the owner's api_requests_per_second
    except PunctualError as exc:
        return errors.lambda_response(exc)
    return app.resolve_with(edges.json_media(event), context, services=services, owner=owner)


app = ConcurrentResolver(enable_validation=True, json_body_deserializer=edges.strict_json)
errors.register(app)
app.enable_swagger(
    path="/docs",
    title=openapi.TITLE,
    version=__version__,
    description=openapi.DESCRIPTION,
    security_schemes=openapi.SECURITY_SCHEMES,
    security=openapi.SECURITY,
)


# -- jobs -----------------------------------------------------------------------------------------


@app.post(
    "/jobs",
    operation_id="createJob",
    tags=["jobs"],
    summary="Create a job (idempotent with an Idempotency-Key)",
    responses=openapi.responses(
        {201: ("Created", JobResponse), 200: ("Replayed: this Idempotency-Key already created it", JobResponse)},
        openapi.CREATE_ERRORS,
        links=openapi.JOB_LINKS,
    ),
)
def create_job(
    body: JobCreate,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            description="retry-safe create: one job per key and owner (printable ASCII, no spaces)",
            min_length=1,
            max_length=checks.MAX_IDEMPOTENCY_KEY,
            pattern=checks.IDEMPOTENCY_KEY_PATTERN,
        ),
    ] = None,
) -> Response[JobResponse]:
    services, owner = _caller()
    limits = services.limits.get(owner) if services.limits is not None else None
    created = jobs.create_job(
        services.store,
        owner,
        body,
        services.clock.now_ms(),
        idempotency_key=idempotency_key,
        policy=TargetPolicy.of(services.settings),
        keys=services.keys,
        max_jobs=None if limits is None else limits.max_jobs,
        max_timeout_s=services.settings.max_timeout_s,
    )
    headers = {"Location": f"/jobs/{created.job.id}"}
    if created.replayed:
        headers["Idempotent-Replayed"] = "true"
    if created.replayed:
        return _json(200, _job_response(services, created.job), headers)
    new = JobResponse.from_job(created.job, last_run_at=None, next_run_at=created.job.next_run_at)  # no run yet
    return _json(201, new, headers)


@app.get(
    "/jobs",
    operation_id="listJobs",
    tags=["jobs"],
    summary="List the caller's jobs, newest first",
    responses=openapi.responses({200: ("A page of jobs", JobPage)}, openapi.LIST_ERRORS),
)
def list_jobs(
    status: Annotated[JobStatus | None, Query(description="only jobs in this status (deleted: only deleted)")] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> JobPage:
    services, owner = _caller()
    page = jobs.list_jobs(services.store, owner, status=status, limit=limit, cursor=cursor)
    now = services.clock.now_ms()
    last, nxt = job_runs.last_run_times(services.store, page.items, now), job_runs.next_run_times(page.items, now)
    items = [JobResponse.from_job(j, last_run_at=last[j.id], next_run_at=nxt[j.id]) for j in page.items]
    return JobPage(items=items, next_cursor=page.cursor)


@app.get(
    "/jobs/<job_id>",
    operation_id="getJob",
    tags=["jobs"],
    summary="Get a job",
    responses=openapi.responses(
        {200: ("The job; a deleted job too (status deleted) until its retention ends, then 404", JobResponse)},
        openapi.READ_ERRORS,
    ),
)
def get_job(job_id: JobId) -> JobResponse:
    services, owner = _caller()
    job = jobs.get_job(services.store, owner, job_id)
    return _job_response(services, job, dependency_graph.waiting(services.store, job))


@app.get(
    "/jobs/<job_id>/graph",
    operation_id="getJobGraph",
    tags=["jobs"],
    summary="A job's dependencies: every job upstream and downstream of it, with their newest runs",
    responses=openapi.responses({200: ("The dependency graph", JobGraph)}, openapi.READ_ERRORS),
)
def get_job_graph(job_id: JobId) -> JobGraph:
    services, owner = _caller()
    job = jobs.get_job(services.store, owner, job_id)
    return JobGraph.from_graph(dependency_graph.job_graph(services.store, job))


@app.patch(
    "/jobs/<job_id>",
    operation_id="updateJob",
    tags=["jobs"],
    summary="Change a job (merge patch); recomputes next_run_at when the schedule changes",
    responses=openapi.responses({200: ("The changed job", JobResponse)}, openapi.CHANGE_ERRORS),
)
def update_job(job_id: JobId, body: JobPatch) -> JobResponse:
    services, owner = _caller()
    job = jobs.update_job(
        services.store,
        owner,
        job_id,
        body.changes(),
        services.clock.now_ms(),
        policy=TargetPolicy.of(services.settings),
        keys=services.keys,
        max_timeout_s=services.settings.max_timeout_s,
    )
    return _job_response(services, job)


@app.delete(
    "/jobs/<job_id>",
    operation_id="deleteJob",
    tags=["jobs"],
    summary="Delete a job (it stays readable until its retention ends)",
    responses=openapi.responses({204: ("Deleted (again: still 204)", None)}, openapi.DELETE_ERRORS),
)
def delete_job(
    job_id: JobId,
    force: Annotated[
        bool, Query(description="delete even if other jobs depend on it (they stay valid and wait)")
    ] = False,
) -> Response[None]:
    services, owner = _caller()
    lifecycle.delete_job(services.store, owner, job_id, services.clock.now_ms(), force=force)
    return Response(status_code=204, content_type=None, body=None)


@app.post(
    "/jobs/<job_id>/pause",
    operation_id="pauseJob",
    tags=["jobs"],
    summary="Pause a job (no runs until resumed)",
    responses=openapi.responses({200: ("The paused job", JobResponse)}, openapi.ACTION_ERRORS),
)
def pause_job(job_id: JobId) -> JobResponse:
    services, owner = _caller()
    return _job_response(services, lifecycle.pause_job(services.store, owner, job_id, services.clock.now_ms()))


@app.post(
    "/jobs/<job_id>/resume",
    operation_id="resumeJob",
    tags=["jobs"],
    summary="Resume a paused job (missed times follow the job's catch-up policy)",
    responses=openapi.responses({200: ("The active job", JobResponse)}, openapi.ACTION_ERRORS),
)
def resume_job(job_id: JobId) -> JobResponse:
    services, owner = _caller()
    return _job_response(services, lifecycle.resume_job(services.store, owner, job_id, services.clock.now_ms()))


@app.post(
    "/jobs/<job_id>/trigger",
    operation_id="triggerJob",
    tags=["jobs"],
    summary="Run a job now, outside its schedule",
    responses=openapi.responses(
        {202: ("The manual run, queued", RunResponse)}, openapi.ACTION_ERRORS, links=openapi.RUN_LINKS
    ),
)
def trigger_job(job_id: JobId) -> Response[RunResponse]:
    services, owner = _caller()
    run = job_runs.trigger_job(
        services.store,
        services.queue,
        owner,
        job_id,
        services.clock.now_ms(),
        retention_s=services.settings.retention_s,
        long_run_after_s=services.settings.long_run_after_s,
    )
    if services.metrics is not None and run.is_open:  # dispatched, as the scheduler's and a release's runs are
        services.metrics.count(RUNS_DISPATCHED)
    return _json(202, RunResponse.from_run(run), {"Location": f"/runs/{run.run_id}"})


# -- runs -----------------------------------------------------------------------------------------


@app.get(
    "/jobs/<job_id>/runs",
    operation_id="listRuns",
    tags=["runs"],
    summary="List a job's runs, newest scheduled time first",
    responses=openapi.responses({200: ("A page of runs", RunPage)}, openapi.READ_ERRORS),
)
def list_runs(
    job_id: JobId,
    *,
    state: Annotated[list[RunState] | None, Query(description="only runs in these states (repeatable)")] = None,
    since: Annotated[AwareRfc3339 | None, Query(description="scheduled at or after (RFC 3339 with offset)")] = None,
    until: Annotated[AwareRfc3339 | None, Query(description="scheduled at or before (RFC 3339 with offset)")] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> RunPage:
    services, owner = _caller()
    query = RunQuery(
        states=frozenset(state or ()),
        since=None if since is None else from_datetime(since),
        until=None if until is None else from_datetime(until),
        limit=limit,
        cursor=cursor,
    )
    page = job_runs.list_runs(services.store, owner, job_id, query)
    return RunPage(items=[RunResponse.from_run(r) for r in page.items], next_cursor=page.cursor)


@app.get(
    "/runs/<run_id>",
    operation_id="getRun",
    tags=["runs"],
    summary="Get a run with its attempts (its logs)",
    responses=openapi.responses({200: ("The run", RunResponse)}, openapi.READ_ERRORS),
)
def get_run(run_id: RunId) -> RunResponse:
    services, owner = _caller()
    run = job_runs.get_run(services.store, owner, run_id)
    return RunResponse.from_run(run, job_runs.notification_of(services.store, run))


# -- other routers (they share this app's per-request context) --------------------------------------

app.include_router(alerts.router)
app.include_router(replay.router)
app.include_router(stats.router)
app.include_router(signing.router)
app.include_router(tenants.router)
app.include_router(preview.router)
app.include_router(calendars.router)
app.include_router(callbacks.router)


def _resolve_routes() -> None:
    """Compute every route's parameters and body model now. powertools computes them on a route's
    first use, and the OpenAPI document is built from the same objects: a request thread computing
    them while another generates the document left it looking up a field it never saw (a KeyError,
    a 500 to a console that fetched /openapi.json beside its first preview request)."""
    for route in [*app._static_routes, *app._dynamic_routes]:
        _ = route.dependant, route.body_field


# -- documentation --------------------------------------------------------------------------------


@app.get("/openapi.json", include_in_schema=False)
def openapi_document() -> Response[Any]:
    base = app._get_base_path() or "/"
    return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=openapi_json(base))


@lru_cache(maxsize=8)
def openapi_json(server_url: str = "/") -> str:
    """The OpenAPI document, generated from the routes (cached: the routes never change)."""
    with _DOCUMENT:
        return _generated(server_url)


def _generated(server_url: str) -> str:
    return app.get_openapi_json_schema(
        title=openapi.TITLE,
        version=__version__,
        description=openapi.DESCRIPTION,
        servers=[Server(url=server_url)],
        security_schemes=openapi.SECURITY_SCHEMES,
        security=openapi.SECURITY,
    )


# -- helpers --------------------------------------------------------------------------------------


def _job_response(services: Services, job: Job, waiting: dependency_graph.Waiting | None = None) -> JobResponse:
    """``job`` as the API shows it, with when it last ran (:func:`punctual.jobs.runs.last_run_times`)."""
    now = services.clock.now_ms()
    last, nxt = job_runs.last_run_times(services.store, [job], now), job_runs.next_run_times([job], now)
    return JobResponse.from_job(job, waiting, last_run_at=last[job.id], next_run_at=nxt[job.id])


def _caller() -> tuple[Services, str]:
    return caller(app.context)


def _json(status: int, body: Any, headers: dict[str, str]) -> Response[Any]:
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body, headers=headers)


_resolve_routes()  # last: every route of the module is registered
