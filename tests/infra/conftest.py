"""Session fixtures: the app synthesized once per variant (see ``tests/infra/synth.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.infra.synth import OPTIONS_CONTEXT, Synth, plan_context, synthesize


@pytest.fixture(scope="session")
def default_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(tmp_path_factory.mktemp("cdk-default"))


@pytest.fixture(scope="session")
def options_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(tmp_path_factory.mktemp("cdk-options"), OPTIONS_CONTEXT)


@pytest.fixture(scope="session")
def default_closed_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The default stack with ``-c open_index=false``."""
    return synthesize(tmp_path_factory.mktemp("cdk-default-closed"), {"open_index": "false"})


@pytest.fixture(scope="session")
def plan_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The stack of the 10M-job / 20k-runs/s plan's deploy line (``tests.infra.synth.PLAN_LOAD``)."""
    return synthesize(tmp_path_factory.mktemp("cdk-plan"), plan_context())


@pytest.fixture(scope="session")
def plan_closed_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The plan's stack with ``-c open_index=false``."""
    return synthesize(tmp_path_factory.mktemp("cdk-plan-closed"), plan_context(open_index=False))


@pytest.fixture(scope="session", params=["default", "default_closed", "plan", "plan_closed"])
def shipped_synth(request: pytest.FixtureRequest) -> Iterator[Synth]:
    """Each stack that must hold: the default and the plan's, each also with open_index=false."""
    yield request.getfixturevalue(f"{request.param}_synth")


@pytest.fixture(scope="session", params=["default", "options"])
def any_synth(request: pytest.FixtureRequest) -> Iterator[Synth]:
    yield request.getfixturevalue(f"{request.param}_synth")
