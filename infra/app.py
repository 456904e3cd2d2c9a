"""The CDK app: ``python -m infra.app`` (cdk.json runs it for ``npx cdk synth`` / ``deploy``).

Run as a module from the project root, never as ``python infra/app.py``: that would put
``infra/`` first on sys.path, where ``infra/constructs`` would shadow the ``constructs`` library.

Context: cdk.json's ``context`` (CDK feature flags, optional parameters), then the ``-c name=value``
flags the CLI passes (tests pass ``build_app(context=...)`` instead). Parameters and defaults:
``infra.config.InfraConfig`` and docs/deploy.md. An invalid parameter exits with status 2 and one
message naming it. Synthesis without sizing parameters, or without an alarm subscriber, prints a
notice on stderr (``infra.sizing``) and goes on.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra import constants, sizing
from infra.config import InfraConfig, InfraConfigError
from infra.stack import PunctualStack


def build_app(context: Mapping[str, Any] | None = None, outdir: str | None = None, *, nag: bool = True) -> cdk.App:
    """The app with the Punctual stack and (``nag``) the cdk-nag AwsSolutions checks.

    ``context`` adds to cdk.json's context (tests pass parameters here; the CLI passes ``-c``
    flags through the environment, which CDK reads itself). Raises :class:`InfraConfigError`.
    """
    app = cdk.App(context={**cdk_json_context(), **(context or {})}, outdir=outdir)
    config = InfraConfig.from_context(app.node)
    PunctualStack(app, config.stack_name, config=config)
    cdk.Tags.of(app).add("project", constants.PROJECT_TAG)
    if nag:
        # cdk-nag 3: a validation plugin. Synthesis fails on any unacknowledged finding and writes
        # validation-report.json into the output directory.
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


def cdk_json_context() -> dict[str, Any]:
    """The ``context`` of cdk.json, so an app built in-process (tests) matches ``npx cdk synth``."""
    context: dict[str, Any] = json.loads(constants.CDK_JSON.read_text()).get("context", {})
    return context


def main() -> int:
    try:
        app = build_app()
    except InfraConfigError as exc:
        print(f"punctual infra: {exc}", file=sys.stderr)
        return 2
    given = dict(app.node.get_all_context() or {})
    for notice in sizing.notices(InfraConfig.from_context(app.node), given):
        print(f"punctual infra: notice: {notice}", file=sys.stderr)
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
