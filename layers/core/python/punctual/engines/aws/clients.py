"""boto3 clients, made in one place: a cached factory over an injectable session.

- Endpoints are not configured here: boto3 reads ``AWS_ENDPOINT_URL`` and
  ``AWS_ENDPOINT_URL_DYNAMODB`` / ``AWS_ENDPOINT_URL_SQS`` itself, so the same code talks to moto,
  LocalStack or AWS.
- Clients are created lazily (nothing does I/O at import or construction) and under a lock:
  boto3 sessions are not thread-safe, the clients they make are.
- ``serialize=True`` runs every DynamoDB call under one process-wide lock. moto is not thread-safe
  (racing conditional updates on it lose updates), so a race test against moto would otherwise test
  moto's bug. Never needed against DynamoDB itself.
- Every client reports the ``Date`` header of its responses to a :class:`ServiceClock`, which the
  scheduler uses to measure and correct its own clock's skew.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import deque
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any

import boto3
from botocore.config import Config

# One lock for the whole process: moto's in-process backend is shared by every client.
DYNAMODB_LOCK = threading.Lock()

_BASE_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 5},
    connect_timeout=3,
    max_pool_connections=64,  # the store and queue fan out over small thread pools
    tcp_keepalive=True,
    user_agent_extra="punctual",
)
# DynamoDB answers in milliseconds: a stuck connection should fail over to a retry quickly.
# SQS long polls for up to 20 s, so its read timeout must be longer than that.
CONFIGS: dict[str, Config] = {
    "dynamodb": _BASE_CONFIG.merge(Config(read_timeout=5)),
    "sqs": _BASE_CONFIG.merge(Config(read_timeout=30)),
}


class AwsClients:
    """Cached DynamoDB and SQS clients from one boto3 session.

    ``session`` defaults to a new ``boto3.session.Session`` (credentials and endpoints from the
    environment); ``region`` is used unless the session names one.
    """

    def __init__(
        self,
        session: boto3.session.Session | None = None,
        *,
        region: str | None = None,
        serialize: bool = False,
        service_clock: ServiceClock | None = None,
    ) -> None:
        self._session = session
        self._region = region
        self._serialize = serialize
        self._lock = threading.Lock()
        self._clients: dict[str, Any] = {}
        self.service_clock = service_clock or ServiceClock()

    @property
    def dynamodb(self) -> Any:
        return self.client("dynamodb")

    @property
    def sqs(self) -> Any:
        return self.client("sqs")

    def client(self, service: str) -> Any:
        """The cached low-level client for ``service`` (created on first use)."""
        with self._lock:
            if service not in self._clients:
                self._clients[service] = self._make(service)
            return self._clients[service]

    def close(self) -> None:
        """Close every client's connection pool."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def _make(self, service: str) -> Any:
        if self._session is None:
            self._session = boto3.session.Session(region_name=self._region)
        region = self._session.region_name or self._region
        client = self._session.client(service, region_name=region, config=CONFIGS.get(service, _BASE_CONFIG))
        self.service_clock.attach(client)
        if self._serialize and service == "dynamodb":
            return SerializedClient(client, DYNAMODB_LOCK)
        return client


class SerializedClient:
    """A client proxy whose API calls run one at a time under ``lock`` (for moto only)."""

    # helpers that make no request themselves (paginators and waiters call the unwrapped client)
    _UNLOCKED = frozenset({"get_paginator", "get_waiter", "can_paginate", "close", "generate_presigned_url"})

    def __init__(self, client: Any, lock: threading.Lock) -> None:
        self._client = client
        self._lock = lock

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name.startswith("_") or name in self._UNLOCKED or not callable(attr):
            return attr

        @functools.wraps(attr)
        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        self.__dict__[name] = locked  # cached: __getattr__ is not consulted for this name again
        return locked


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class ServiceClock:
    """The skew of AWS's clock against this host's wall clock, from response ``Date`` headers.

    ``Date`` has one-second resolution and is stamped somewhere between our send and our receive,
    so one response bounds the skew (server time - local time) to an interval::

        low  = date - received          (stamped at the last moment, truncated by up to 0 ms)
        high = date + 999 - sent        (stamped at the first moment, truncated by up to 999 ms)

    Intersecting the intervals of recent responses (their sub-second phases differ) narrows the
    estimate to about one round trip. If the intersection becomes empty, a clock stepped: the
    window restarts from the newest sample.
    """

    def __init__(self, wall_ms: Callable[[], int] = _wall_ms, window: int = 64) -> None:
        self._wall_ms = wall_ms
        self._sent = threading.local()  # a request is sent and answered on the same thread
        self._lock = threading.Lock()
        self._window: deque[tuple[int, int]] = deque(maxlen=window)
        self.samples = 0  # responses measured so far
        self.last_sample_ms: int | None = None  # midpoint of the newest single response's bounds
        self.measured_at: int | None = None  # local wall time (ms) of the newest sample

    def attach(self, client: Any) -> None:
        """Measure every response of ``client`` (every attempt, including retries and errors)."""
        client.meta.events.register("before-send", self._on_send)
        client.meta.events.register("response-received", self._on_response)

    @property
    def bounds_ms(self) -> tuple[int, int] | None:
        """(low, high) bounds of the skew from the recent window, or None before any response."""
        with self._lock:
            return _intersect(self._window)

    @property
    def skew_ms(self) -> int | None:
        """Best estimate of server time minus local time, in ms (None before any response)."""
        bounds = self.bounds_ms
        return None if bounds is None else (bounds[0] + bounds[1]) // 2

    def observe(self, date_header: str, sent_ms: int, received_ms: int) -> None:
        """Record one response whose ``Date`` was ``date_header``, sent/received at local times."""
        try:
            server_ms = int(parsedate_to_datetime(date_header).timestamp() * 1000)
        except (TypeError, ValueError, IndexError):
            return  # a malformed or missing header measures nothing
        sample = (server_ms - received_ms, server_ms + 999 - sent_ms)
        with self._lock:
            self._window.append(sample)
            if _intersect(self._window) is None:
                self._window.clear()
                self._window.append(sample)
            self.samples += 1
            self.last_sample_ms = (sample[0] + sample[1]) // 2
            self.measured_at = received_ms

    def _on_send(self, **_: Any) -> None:
        self._sent.ms = self._wall_ms()

    def _on_response(self, response_dict: dict[str, Any] | None = None, **_: Any) -> None:
        sent, self._sent.ms = getattr(self._sent, "ms", None), None
        if sent is None or not response_dict:
            return
        date = response_dict.get("headers", {}).get("Date")
        if date:
            self.observe(date, sent, self._wall_ms())


def _intersect(window: deque[tuple[int, int]]) -> tuple[int, int] | None:
    if not window:
        return None
    low = max(sample[0] for sample in window)
    high = min(sample[1] for sample in window)
    return (low, high) if low <= high else None
