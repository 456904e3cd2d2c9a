"""The dependency graph's response (``GET /jobs/{id}/graph``): a job, the jobs around it, the edges."""

from __future__ import annotations

from pydantic import BaseModel, Field

from punctual.api.schemas import IsoTime, _iso
from punctual.dependencies.graph import Graph, Node
from punctual.model import DependencyWhen, JobStatus, RunState


class GraphJob(BaseModel):
    """A job in a dependency graph, with its newest run."""

    id: str
    name: str
    status: JobStatus
    last_run_id: str | None
    last_run_state: RunState | None
    last_run_at: IsoTime | None = Field(description="scheduled time of its newest run")

    @classmethod
    def from_node(cls, node: Node) -> GraphJob:
        run = node.last_run
        return cls(
            id=node.job.id,
            name=node.job.name,
            status=node.job.status,
            last_run_id=None if run is None else run.run_id,
            last_run_state=None if run is None else run.state,
            last_run_at=None if run is None else _iso(run.scheduled_at),
        )


class GraphEdge(BaseModel):
    upstream: str = Field(description="the job that runs first")
    dependent: str = Field(description="the job its runs release")
    when: DependencyWhen


class JobGraph(BaseModel):
    """A job with every job it depends on (upstream) and every job that depends on it (downstream)."""

    job: GraphJob
    upstream: list[GraphJob]
    downstream: list[GraphJob]
    edges: list[GraphEdge]
    truncated: bool = Field(description="the graph has more jobs than one response shows")

    @classmethod
    def from_graph(cls, graph: Graph) -> JobGraph:
        return cls(
            job=GraphJob.from_node(graph.job),
            upstream=[GraphJob.from_node(n) for n in graph.upstream],
            downstream=[GraphJob.from_node(n) for n in graph.downstream],
            edges=[GraphEdge(upstream=e.upstream_id, dependent=e.dependent_id, when=e.when) for e in graph.edges],
            truncated=graph.truncated,
        )
