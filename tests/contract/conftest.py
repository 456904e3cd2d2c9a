"""Contract-suite fixtures on top of tests/conftest.py's ``engine`` and ``clock``.

Speed: ``aws_engine`` is overridden here with the same meaning as tests/conftest.py's (fresh tables
and queues per test, same settings, DynamoDB serialized) but one moto mock and one set of boto3
clients for the whole package, reset between tests: ~20 ms of setup per test instead of ~600 ms
(creating botocore clients dominates). The mock is package-scoped, so it is stopped before any other
test directory runs.

Time: the store takes ``now`` as an argument and the embedded queue reads the injected
ManualClock, but moto's SQS runs on real time. ``elapse(seconds)`` therefore advances the
ManualClock on both engines and also sleeps for real on ``aws`` only: queue delay and visibility
tests use 1-2 s on both engines and cost real seconds only where they must.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from punctual.clock import ManualClock
from punctual.config import EngineKind, Settings
from punctual.port import Engine, Store

AWS_SETTINGS = Settings(engine=EngineKind.AWS, shards=4, open_shards=2, name_prefix="test")


@pytest.fixture(scope="package")
def _moto() -> Iterator[tuple[Any, Any]]:
    from moto import mock_aws

    from punctual.engines.aws import AwsClients

    class SharedClients(AwsClients):
        def close(self) -> None:  # shared by every test of the package; closed at the end
            pass

    mock = mock_aws()
    mock.start()
    clients = SharedClients(region=AWS_SETTINGS.region, serialize=True)
    try:
        yield mock, clients
    finally:
        AwsClients.close(clients)
        mock.stop()


@pytest.fixture
def aws_engine(_moto: tuple[Any, Any], clock: ManualClock) -> Iterator[Engine]:
    from punctual.engines.aws import AwsEngine
    from punctual.engines.aws.bootstrap import ensure_resources

    mock, clients = _moto
    mock.reset()  # every test starts from an empty account
    settings = ensure_resources(AWS_SETTINGS, clients=clients)
    engine = AwsEngine(settings, clock=clock, clients=clients)
    yield engine
    engine.close()


@pytest.fixture
def engine_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.node.callspec.params["engine"]
    return kind


@pytest.fixture
def store(engine: Engine) -> Store:
    return engine.store


@pytest.fixture
def elapse(engine_kind: str, clock: ManualClock) -> Callable[[float], None]:
    def elapse(seconds: float) -> None:
        clock.advance(int(seconds * 1000))
        if engine_kind == "aws":
            time.sleep(seconds)

    return elapse
