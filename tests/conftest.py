"""Shared fixtures: clocks and engines.

Engines: ``engine`` is parametrized over both engines, so a test that takes it runs twice
(``[embedded]`` and ``[aws]``). The ``aws`` engine runs against moto in-process with its
DynamoDB requests serialized (moto is not thread-safe: FACTS.md). No test ever reaches AWS.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from punctual.clock import ManualClock
from punctual.config import EngineKind, Settings
from punctual.port import Engine

# Never reach a real account, whatever the developer's shell has configured.
for _var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
    os.environ.pop(_var, None)
for _var in [v for v in os.environ if v.startswith("AWS_ENDPOINT_URL")]:
    os.environ.pop(_var, None)
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--soak",
        action="store_true",
        default=False,
        help="run the randomized fault tier (tests/faults/test_randomized.py) 10x longer",
    )


@pytest.fixture(autouse=True)
def _forget_resolved_names() -> Iterator[None]:
    """The process keeps names it checked for a few seconds (targets.resolutions): tests that fake
    DNS answers must not see another test's."""
    from punctual.execution.targets.resolutions import RESOLUTIONS

    RESOLUTIONS.clear()
    yield
    RESOLUTIONS.clear()


START_MS = 1_800_000_000_000  # 2027-01-15T08:00:00Z, a fixed instant for ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


def make_embedded_engine(path: Path, clock: ManualClock, shards: int = 4) -> Engine:
    from punctual.engines.embedded import EmbeddedEngine

    return EmbeddedEngine(path / "punctual.db", shards=shards, clock=clock)


@pytest.fixture
def embedded_engine(tmp_path: Path, clock: ManualClock) -> Iterator[Engine]:
    engine = make_embedded_engine(tmp_path, clock)
    yield engine
    engine.close()


@pytest.fixture
def aws_engine(clock: ManualClock) -> Iterator[Engine]:
    from moto import mock_aws

    from punctual.engines.aws import AwsEngine
    from punctual.engines.aws.bootstrap import ensure_resources

    with mock_aws():
        settings = ensure_resources(Settings(engine=EngineKind.AWS, shards=4, open_shards=2, name_prefix="test"))
        engine = AwsEngine(settings, clock=clock, serialize=True)
        yield engine
        engine.close()


@pytest.fixture(params=["embedded", "aws"])
def engine(request: pytest.FixtureRequest) -> Engine:
    engine: Engine = request.getfixturevalue(f"{request.param}_engine")
    return engine
