"""The IAM proof's harness: one synthesized stack deployed into moto, its components run through
their real entry points, each in the environment the stack gives it and recorded as itself.

- Lambda components run their ``functions/<name>/handler.py`` (a fresh module per stack, so each
  builds its own runtime from its own environment on its first invocation, as a cold start does).
- Fargate components run ``Runtime.worker`` as ``punctual worker`` does, in a thread, until stopped.
- Setup and inspection use ``setup`` (an engine on the same resources, built outside any component:
  its calls are not recorded).

The one change to a component's environment: ``PUNCTUAL_TARGET_ALLOW_LOOPBACK`` (the target the
runs call is an HTTP server on 127.0.0.1, which a deployed worker would refuse) and Powertools'
tracing off (no X-Ray daemon). Neither changes what the component may call on AWS.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import threading
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

from punctual.api.app import handle
from punctual.api.caller import Services
from punctual.clock import SystemClock
from punctual.config import Settings
from punctual.engines.aws import AwsEngine
from punctual.engines.aws.queue import delivery_from_message
from punctual.execution.loop import Tuning
from punctual.runtime.assembly import Runtime
from tests.infra.iam_calls import ACCOUNT, Recorder
from tests.infra.iam_grants import Component, Grant, components, grants_of
from tests.infra.iam_world import World, deploy

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"
HANDLERS = {
    "api": "api",
    "scheduler": "scheduler",
    "worker": "worker",
    "reaper": "reaper",
    "callback_authorizer": "callback_authorizer",
}
TEST_ENV = {"PUNCTUAL_TARGET_ALLOW_LOOPBACK": "true", "POWERTOOLS_TRACE_DISABLED": "true"}
OWNER = f"arn:aws:iam::{ACCOUNT}:user/alice"


@dataclass
class LambdaContext:
    """What the handlers read of a Lambda context; ``remaining_ms`` bounds a scheduler invocation."""

    remaining_ms: int = 60_000
    function_name: str = "fn"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:fn"
    aws_request_id: str = "request-1"
    log_stream_name: str = "2027/01/15/[$LATEST]iamproof"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


class Stack:
    """One synthesized stack in moto: its components, their environments, and the recorder."""

    def __init__(self, template: Mapping[str, Any], recorder: Recorder) -> None:
        self.template = template
        self.recorder = recorder
        self.world: World = deploy(template)
        self.components: dict[str, Component] = {c.name: c for c in components(template)}
        self.settings = Settings.from_env(self.environment("api"))
        self.setup = AwsEngine(self.settings, clock=SystemClock(), serialize=True)
        self.services = Services.of(self.setup, self.settings, SystemClock())
        self._handlers: dict[str, ModuleType] = {}

    def environment(self, name: str) -> dict[str, str]:
        return {**self.world.environment(self.components[name]), **TEST_ENV}

    @contextlib.contextmanager
    def acting_as(self, name: str) -> Iterator[None]:
        """Run as component ``name``: its environment, its recorded clients."""
        saved = dict(os.environ)
        for key in [k for k in os.environ if k.startswith(("PUNCTUAL_", "POWERTOOLS_"))]:
            del os.environ[key]
        os.environ.update(self.environment(name))
        try:
            with self.recorder.acting_as(name):
                yield
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def invoke(self, name: str, event: Mapping[str, Any], context: LambdaContext | None = None) -> Any:
        """Invoke Lambda component ``name``'s handler with ``event``."""
        with self.acting_as(name):
            return self._handler(name).handler(dict(event), context or LambdaContext())

    def call_api(self, method: str, path: str, body: Any = None, *, caller: str = OWNER, **query: str) -> Any:
        """One request through the api handler; returns (status, parsed body)."""
        response = self.invoke("api", api_event(method, path, body, caller=caller, query=query))
        text = response.get("body")
        return response["statusCode"], json.loads(text) if text else None

    def setup_api(self, method: str, path: str, body: Any = None, *, caller: str = OWNER) -> Any:
        """The same request as setup (not recorded): builds what a scenario needs."""
        response = handle(api_event(method, path, body, caller=caller), None, self.services)
        assert response["statusCode"] < 300, response
        return json.loads(response["body"]) if response.get("body") else None

    @contextlib.contextmanager
    def long_running_worker(self, name: str) -> Iterator[Runtime]:
        """Fargate component ``name``: ``punctual worker`` (the async worker) polling its queue, stopped on exit."""
        # acting the whole time: the worker makes some clients lazily (the AWS targets' on first use)
        with self.acting_as(name):
            runtime = Runtime.open(Settings.from_env(), serialize=True)
            worker = runtime.worker(tuning=Tuning(max_in_flight=50, receive_batch=10, receivers=1, wait_s=0.2))
            stop = threading.Event()
            thread = threading.Thread(target=worker.run, args=(stop,), name=f"iam-{name}", daemon=True)
            thread.start()
            try:
                yield runtime
            finally:
                stop.set()
                thread.join(30)
                runtime.close()
                assert not thread.is_alive(), f"{name} did not stop"

    def grants(self, name: str) -> list[Grant]:
        """What the template grants component ``name`` (tokens resolved to the deployed resources)."""
        return grants_of(self.template, self.components[name].role_id, self.world.resolve)

    def scheduler_event(self) -> dict[str, Any]:
        """What the stack's schedule sends scheduler instance 0 (``{"instance": 0, "instances": K}``)."""
        for resource in self.template["Resources"].values():
            if resource["Type"] == "AWS::Events::Rule":
                for rule_target in resource["Properties"].get("Targets", []):
                    # an input template: the event's time goes in as a JSON string (<time>)
                    text = rule_target.get("Input") or rule_target.get("InputTransformer", {}).get("InputTemplate")
                    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # the event of this minute
                    event = json.loads((text or "{}").replace("<time>", json.dumps(now)))
                    if event.get("instance") == 0:
                        return dict(event)
        raise AssertionError("no schedule invokes scheduler instance 0")

    def queued_run_ids(self, queue_url: str) -> set[str]:
        """The runs of the messages now visible on ``queue_url`` (received, visible again in 1 s)."""
        found: set[str] = set()
        for _ in range(20):
            messages = self.setup.clients.sqs.receive_message(
                QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=1
            ).get("Messages", [])
            if not messages:
                break
            found.update(delivery_from_message(m).run_id for m in messages)
        return found

    def close(self) -> None:
        self.setup.close()

    def _handler(self, name: str) -> ModuleType:
        if name not in self._handlers:
            path = FUNCTIONS / HANDLERS[name] / "handler.py"
            spec = importlib.util.spec_from_file_location(f"iam_proof_{name}_{uuid.uuid4().hex}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self._handlers[name] = module
        return self._handlers[name]


def api_event(
    method: str, path: str, body: Any = None, *, caller: str, query: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """An API Gateway REST (v1) proxy event of an IAM-authorized (SigV4) caller."""
    return {
        "httpMethod": method,
        "path": path,
        "resource": "/{proxy+}",
        "headers": {"Content-Type": "application/json"} if body is not None else {},
        "body": None if body is None else json.dumps(body),
        "isBase64Encoded": False,
        "queryStringParameters": dict(query) if query else None,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "requestContext": {
            "identity": {"userArn": caller, "caller": caller},
            "stage": "v1",
            "requestId": uuid.uuid4().hex,
            "resourcePath": "/{proxy+}",
            "httpMethod": method,
            "path": path,
        },
    }


def sqs_records(messages: list[dict[str, Any]], queue_arn: str) -> dict[str, Any]:
    """Received SQS messages shaped as the Lambda SQS event source hands them to a function."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m["Attributes"],
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
    }


class TargetServer:
    """An HTTP target on 127.0.0.1: ``/ok...`` answers 200, anything else 500; records the requests."""

    def __init__(self) -> None:
        requests: list[tuple[str, dict[str, str]]] = []

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                requests.append((self.path, dict(self.headers)))
                status = 200 if self.path.startswith("/ok") else 500
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_POST = do_GET = do_PUT = _answer  # noqa: N815 - http.server's naming

            def log_message(self, *_: Any) -> None:
                pass

        self.requests = requests
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="iam-target", daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
