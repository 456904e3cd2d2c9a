"""What every long-running command shares: engine flags, settings, signals."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from typing import Any

from punctual.clock import SystemClock
from punctual.config import EngineKind, Settings
from punctual.engines import open_engine
from punctual.port import Engine


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", choices=[k.value for k in EngineKind], help="storage engine (default: embedded)")
    parser.add_argument("--data-dir", help="embedded engine: directory of the SQLite file (default: .punctual)")
    parser.add_argument(
        "--endpoint-url", help="aws engine: endpoint for DynamoDB and SQS (a moto server, LocalStack); default: AWS"
    )
    parser.add_argument("--shards", type=int, help="number of due-index shards (default: 16)")


def settings_from_args(args: argparse.Namespace, **overrides: Any) -> Settings:
    """Settings from PUNCTUAL_* variables, overridden by the command's flags."""
    if getattr(args, "endpoint_url", None):
        os.environ["AWS_ENDPOINT_URL"] = args.endpoint_url
    return Settings.from_env(
        engine=getattr(args, "engine", None),
        data_dir=getattr(args, "data_dir", None),
        shards=getattr(args, "shards", None),
        **overrides,
    )


def engine_from_settings(settings: Settings, *, bootstrap: bool = False) -> tuple[Settings, Engine]:
    """Open the engine; with ``bootstrap`` on the aws engine, create tables and queues if missing."""
    if settings.engine is EngineKind.AWS and bootstrap:
        from punctual.engines.aws.bootstrap import ensure_resources

        settings = ensure_resources(settings)
    return settings, open_engine(settings, clock=SystemClock())


def stop_event_on_signals() -> threading.Event:
    """An event set by SIGINT or SIGTERM, so loops finish their step and clean up (leases, in-flight runs)."""
    stop = threading.Event()

    def _stop(signum: int, _frame: object) -> None:
        logging.getLogger("punctual").info("received signal %s, stopping", signum)
        stop.set()

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    return stop


def configure_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("botocore").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per target call is noise; runs have logs
