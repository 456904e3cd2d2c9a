"""``punctual dev``: the whole system in one process, for a laptop (``make run``).

It starts the HTTP API (the same resolver as Lambda, behind uvicorn on 127.0.0.1) and every
background component :func:`dev_components` returns, all sharing one engine: the embedded SQLite
file under ``--data-dir`` by default (so a restart keeps the jobs), or ``--engine aws`` against
an endpoint (a moto server, LocalStack, an account), whose tables and queues it creates if missing.

On start it prints ``Punctual API: <url>`` and ``API key: <key>`` (the key is created once and
kept in ``<data-dir>/api-key``), ``Console: <url>/console/#key=<key>`` (signed in: the key rides in
the URL fragment, which browsers never send), then how to stop. SIGINT (Ctrl-C) and SIGTERM stop it cleanly:
components get the stop event and finish their step, the server finishes in-flight requests,
the engine is closed.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys
import threading
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlencode

from punctual.api.auth import DEFAULT_DEV_OWNER, ApiKeys, load_or_create_key
from punctual.api.caller import Services
from punctual.cli.common import (
    add_engine_flags,
    configure_logging,
    engine_from_settings,
    settings_from_args,
    stop_event_on_signals,
)
from punctual.clock import SystemClock
from punctual.config import Settings
from punctual.execution.loop import Tuning
from punctual.local.server import LocalServer
from punctual.metrics import InMemoryMetrics
from punctual.port import Engine
from punctual.runtime.assembly import Runtime
from punctual.runtime.process import collect_rarely

logger = logging.getLogger("punctual.dev")

JOIN_TIMEOUT_S = 30.0  # a component finishing its step (a worker its in-flight runs) gets this long


class Component(Protocol):
    """A background loop of ``punctual dev`` (scheduler, worker, reaper, ...).

    ``run`` blocks until ``stop`` is set, then returns after cleaning up (release leases, finish
    or hand back in-flight work). It runs in its own thread; an exception stops the whole process.
    """

    name: str

    def run(self, stop: threading.Event) -> object: ...


def dev_components(settings: Settings, engine: Engine, metrics: InMemoryMetrics | None = None) -> list[Component]:
    """The components ``punctual dev`` runs beside the API, all on ``engine``: the scheduler, the
    worker, the reaper, and a status line every 30 s of ``metrics`` (which the API's triggers
    also count into). Nothing here does work before ``run``.

    Local defaults: the reaper looks every 10 s rather than every minute (and ``punctual dev``'s
    settings let HTTP targets reach loopback: a service on the same laptop).
    """
    runtime = Runtime(settings, engine)
    metrics = metrics if metrics is not None else InMemoryMetrics()
    worker = runtime.worker(tuning=Tuning(max_in_flight=1_000), metrics=metrics)
    return [runtime.scheduler(metrics=metrics), worker, runtime.reaper(interval_s=10.0), StatusLine(metrics)]


class StatusLine:
    """Logs the local metrics every ``interval_s``: runs dispatched (every kind: the scheduler's,
    triggered and released ones), succeeded, failed and dead, the shards held, and
    ``StartLatenessMs``: how long after its instant a worker started a run's first attempt, its
    owner's limit waits apart (``punctual.execution.leasing.observe_start``)."""

    name = "status"

    def __init__(self, metrics: InMemoryMetrics, interval_s: float = 30.0) -> None:
        self.metrics = metrics
        self.interval_s = interval_s

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval_s):
            logger.info("status: %s", self.metrics.summary())


def register(subparsers: Any) -> None:
    helps = {
        "dev": "run the API and every component in one process (embedded engine by default)",
        "api": "run only the HTTP API (scheduler, workers and reaper run elsewhere)",
    }
    for name, text in helps.items():
        parser: argparse.ArgumentParser = subparsers.add_parser(name, help=text)
        add_engine_flags(parser)
        parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 picks a free one)")
        parser.add_argument("--api-key", help="accept this API key for the local owner (default: key in --data-dir)")
        parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
        parser.set_defaults(func=run, components=name == "dev")


def run(args: argparse.Namespace) -> int:
    configure_logging(getattr(args, "verbose", False))
    collect_rarely()
    # punctual dev allows targets on the same laptop; `punctual api` follows PUNCTUAL_TARGET_ALLOW_*
    settings = settings_from_args(args, target_allow_loopback=True if args.components else None)
    keys, key = api_keys(args.api_key, Path(settings.data_dir))
    stop = stop_event_on_signals()
    settings, engine = engine_from_settings(settings, bootstrap=True)
    metrics = InMemoryMetrics()  # the status line's: the scheduler's, the workers' and the API's triggers
    server = LocalServer(Services.of(engine, settings, SystemClock(), metrics), keys, host=args.host, port=args.port)
    threads: list[threading.Thread] = []
    failed = threading.Event()
    try:
        url = server.start()
        print(f"Punctual API: {url}")
        print(f"API key: {key}")
        print(f"Console: {console_url(url, key)}")
        print("Press Ctrl-C to stop (SIGTERM also stops it cleanly).", flush=True)
        _warn_if_exposed(args.host)
        if settings.callback_base_url is None:  # callback jobs' targets report to this API
            settings = settings.model_copy(update={"callback_base_url": url})
        components = dev_components(settings, engine, metrics) if args.components else []
        threads = [_start(c, stop, failed) for c in components]
        while not stop.wait(0.5):
            pass
    finally:
        stop.set()
        server.stop()
        for thread in threads:
            thread.join(JOIN_TIMEOUT_S)
            if thread.is_alive():
                logger.warning("%s did not stop within %.0f s", thread.name, JOIN_TIMEOUT_S)
        engine.close()
    print("Punctual stopped.", flush=True)
    return 1 if failed.is_set() else 0


def console_url(api_url: str, key: str) -> str:
    """The console's address, signed in: the key rides in the fragment, which no browser sends."""
    return f"{api_url}/console/#{urlencode({'key': key})}"


def api_keys(explicit: str | None, data_dir: Path) -> tuple[ApiKeys, str]:
    """The accepted keys (``PUNCTUAL_API_KEYS`` plus the dev key for the local owner) and the dev key."""
    keys = ApiKeys.from_env()
    key = explicit or load_or_create_key(data_dir)
    keys.add(key, DEFAULT_DEV_OWNER)
    return keys, key


def _start(component: Component, stop: threading.Event, failed: threading.Event) -> threading.Thread:
    def target() -> None:
        try:
            component.run(stop)
        except Exception:
            # A dead scheduler or worker must not go unnoticed behind a healthy API: stop everything.
            logger.exception("%s failed; stopping punctual dev", component.name)
            failed.set()
            stop.set()

    thread = threading.Thread(target=target, name=f"punctual-{component.name}", daemon=True)
    thread.start()
    return thread


def _warn_if_exposed(host: str) -> None:
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        print(f"warning: listening on {host}, reachable from other machines; keep the API key secret", file=sys.stderr)
