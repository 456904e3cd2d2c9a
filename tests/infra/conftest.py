"""Session fixtures: the app synthesized once per variant (see ``tests/infra/synth.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.infra.synth import (
    OPTIONS_CONTEXT,
    PLAN_ARGS,
    PLAN_CLOSED_ARGS,
    PLAN_LAMBDA_ARGS,
    Synth,
    deploy_line_context,
    printed_deploy_line,
    synthesize,
)


@pytest.fixture(scope="session")
def default_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(tmp_path_factory.mktemp("cdk-default"))


@pytest.fixture(scope="session")
def options_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(tmp_path_factory.mktemp("cdk-options"), OPTIONS_CONTEXT)


@pytest.fixture(scope="session")
def plan_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The stack of the deploy line ``punctual capacity`` prints for the mission's load, parsed from its text."""
    return synthesize(tmp_path_factory.mktemp("cdk-plan"), deploy_line_context(printed_deploy_line(*PLAN_ARGS)))


@pytest.fixture(scope="session")
def default_closed_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The default stack with ``-c open_index=false``."""
    return synthesize(tmp_path_factory.mktemp("cdk-default-closed"), {"open_index": "false"})


@pytest.fixture(scope="session")
def plan_closed_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The plan's stack with ``-c open_index=false``: the deploy line ``punctual capacity ... --no-open-index``
    prints (the plan's recommendation: sized for the reaper's sweep, no open-index shards), parsed from its text."""
    context = deploy_line_context(printed_deploy_line(*PLAN_CLOSED_ARGS))
    assert context["open_index"] == "false", context
    return synthesize(tmp_path_factory.mktemp("cdk-plan-closed"), context)


@pytest.fixture(scope="session")
def plan_lambda_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The mission's plan on Lambda workers (provisioned pollers) and on-demand tables, parsed from its text."""
    return synthesize(
        tmp_path_factory.mktemp("cdk-plan-lambda"), deploy_line_context(printed_deploy_line(*PLAN_LAMBDA_ARGS))
    )


@pytest.fixture(scope="session", params=["default", "default_closed", "plan", "plan_closed"])
def shipped_synth(request: pytest.FixtureRequest) -> Iterator[Synth]:
    """Each stack that must hold: the default and the plan's, each also with open_index=false."""
    yield request.getfixturevalue(f"{request.param}_synth")


@pytest.fixture(scope="session", params=["default", "options", "plan"])
def any_synth(request: pytest.FixtureRequest) -> Iterator[Synth]:
    yield request.getfixturevalue(f"{request.param}_synth")
