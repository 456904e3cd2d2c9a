"""Fixtures of the Lambda handler tests: an aws engine on moto with the environment the CDK app sets."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType

import pytest
from moto import mock_aws

from punctual.clock import SystemClock
from punctual.config import EngineKind, Settings
from punctual.engines.aws import AwsEngine, ensure_resources
from punctual.port import Engine

ENV = {
    "PUNCTUAL_ENGINE": "aws",
    "PUNCTUAL_NAME_PREFIX": "lambdas",
    "PUNCTUAL_SHARDS": "4",
    "PUNCTUAL_OPEN_SHARDS": "2",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_NAMESPACE": "PunctualTest",
    "POWERTOOLS_SERVICE_NAME": "test",
}


@dataclass
class Context:
    function_name: str = "fn"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:fn"
    aws_request_id: str = "request-1"
    log_stream_name: str = "2027/01/15/[$LATEST]0123abcd"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{name}_handler_under_test", f"functions/{name}/handler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        settings = ensure_resources(Settings(engine=EngineKind.AWS, shards=4, open_shards=2, name_prefix="lambdas"))
        engine = AwsEngine(settings, clock=SystemClock())
        yield engine
        engine.close()
