"""Synthesize the CDK app offline with the cdk-nag checks on (used once per session by conftest).

Three variants cover every branch of the app:
- ``default``: the shipped defaults (the small default: the plan of ``infra.sizing``'s load);
- ``options``: every optional feature on (Fargate workers, API keys + usage plan, worker target
  ARNs including a wildcard, alarm e-mail, disposable tables, API Gateway's account logging role,
  warm throughput, a raised Lambda quota, no open index, a WAF web ACL) at a small size;
- ``plan``: the deploy line ``punctual capacity`` prints for :data:`PLAN_ARGS` (the mission's
  load), parsed from its text output as an operator would copy it.

Two more are stacks that must hold (issue 27): ``default_closed`` (the default with
``-c open_index=false``) and ``plan_closed`` (the deploy line printed for :data:`PLAN_CLOSED_ARGS`,
the plan sized for ``-c open_index=false``). The plan recommends the Fargate worker tier and
provisioned tables for the mission's load (issue 30); ``plan_lambda`` is the line it prints when
told Lambda workers and on-demand tables (:data:`PLAN_LAMBDA_ARGS`): provisioned pollers.

Synthesis never contacts AWS: the stack is environment-agnostic and nothing looks anything up.
The dependency layer is pip-installed once into the layer cache (``infra.layer_build``), so only
the first session after a dependency change needs PyPI.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

OPTIONS_CONTEXT: dict[str, Any] = {
    "stack_name": "PunctualOptions",
    "shards": "16",  # strings, as `-c shards=16` gives them
    "open_shards": "8",
    "scheduler_instances": "7",
    "fargate_workers": "true",
    "fargate_worker_max_count": "8",
    "fargate_prewarm_count": "6",
    "worker_batch_size": "100",  # above 10: needs a batching window
    "worker_batching_window_s": "1",
    "worker_min_pollers": "10",  # provisioned pollers
    "worker_max_pollers": "100",
    "api_usage_plan": True,
    "target_arns": (
        "arn:aws:lambda:eu-west-1:123456789012:function:hook,"
        "arn:aws:sqs:eu-west-1:123456789012:results-*,"
        "arn:aws:states:eu-west-1:123456789012:stateMachine:flow,"
        "arn:aws:events:eu-west-1:123456789012:event-bus/default"
    ),
    "alarm_email": "ops@example.com",
    "retain_data": "false",
    "deletion_protection": "false",
    "log_retention_days": "7",
    "api_cloudwatch_role": "true",
    "warm_throughput": "true",
    "warm_write_units": '{"jobs.due": 12000, "runs": 8000}',  # JSON, as `-c warm_write_units=...` gives it
    "warm_read_units": '{"runs": 15000}',
    "lambda_concurrency_quota": "5000",
    "open_index": "false",  # the reaper sweeps the runs table instead
    "stats_counters": "false",  # with open_index=false: 6 write units per run
    "sweep_pages": "4",
    "web_acl_arn": "arn:aws:wafv2:eu-west-1:123456789012:regional/webacl/edge/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
}
# punctual capacity for the mission's load: its deploy line is the "plan" stack's context
PLAN_ARGS = ("capacity", "--jobs", "10000000", "--peak-runs-per-second", "20000")
# ... sized for -c open_index=false (the plan's recommendation): the "plan_closed" stack's context
PLAN_CLOSED_ARGS = (*PLAN_ARGS, "--no-open-index")
# ... on Lambda workers (provisioned pollers) and on-demand tables: the "plan_lambda" stack's context
PLAN_LAMBDA_ARGS = (*PLAN_ARGS, "--worker", "lambda", "--dynamodb", "on-demand")


def printed_deploy_line(*args: str) -> str:
    """The ``npx cdk deploy`` line ``punctual <args>`` prints (the line under its "Deploy" heading)."""
    from punctual.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(args)) == 0
    lines = out.getvalue().splitlines()
    return lines[lines.index("Deploy") + 1].strip()


def deploy_line_context(line: str) -> dict[str, str]:
    """The ``-c name=value`` pairs of an ``npx cdk deploy`` line, as strings (what the CDK CLI passes)."""
    words = shlex.split(line)
    assert words[:3] == ["npx", "cdk", "deploy"], line
    context: dict[str, str] = {}
    for flag, given in itertools.pairwise(words):
        if flag == "-c":
            name, _, value = given.partition("=")
            context[name] = value
    return context


@dataclass
class Synth:
    """One synthesized app: its output directory, template, validation report and synth error."""

    stack_name: str
    outdir: Path
    template: dict[str, Any]
    report: dict[str, Any] | None
    error: str | None

    @property
    def template_path(self) -> Path:
        return self.outdir / f"{self.stack_name}.template.json"

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.template["Resources"].items() if r["Type"] == resource_type}

    def properties(self, resource_type: str) -> list[dict[str, Any]]:
        return [r.get("Properties", {}) for r in self.resources(resource_type).values()]


def synthesize(outdir: Path, context: dict[str, Any] | None = None) -> Synth:
    """Synthesize with cdk-nag; a validation failure is recorded in ``error``, not raised."""
    from infra import constants  # imported here: loading aws-cdk-lib costs seconds, only infra tests pay

    missing = [
        n
        for n in ("api", "scheduler", "worker", "reaper")
        if not (constants.FUNCTIONS_DIR / n / "handler.py").is_file()
    ]
    if missing:
        pytest.fail(f"Lambda entry points missing: {', '.join(f'functions/{n}/handler.py' for n in missing)}")
    from infra.app import build_app
    from infra.config import InfraConfig

    app = build_app(context, outdir=str(outdir))
    stack_name = InfraConfig.from_context(app.node).stack_name
    error = None
    try:
        app.synth()
    except RuntimeError as exc:  # jsii surfaces the JavaScript ValidationFailed error as RuntimeError
        error = str(exc)
    report_path = outdir / "validation-report.json"
    report = json.loads(report_path.read_text()) if report_path.is_file() else None
    template = json.loads((outdir / f"{stack_name}.template.json").read_text())
    return Synth(stack_name, outdir, template, report, error)
