"""``punctual worker`` and ``punctual reaper``: one long-running component each (Fargate, a VM, a laptop).

Both stop gracefully on SIGTERM/SIGINT: the worker finishes its in-flight runs, the reaper its pass.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from punctual.cli.common import (
    add_engine_flags,
    configure_logging,
    engine_from_settings,
    settings_from_args,
    stop_event_on_signals,
)
from punctual.execution.loop import Tuning
from punctual.runtime.assembly import Runtime
from punctual.runtime.process import collect_rarely, connections_within_open_files


def register(subparsers: Any) -> None:
    worker: argparse.ArgumentParser = subparsers.add_parser(
        "worker", help="execute runs from the dispatch queue until SIGTERM/SIGINT (finishes in-flight runs)"
    )
    add_engine_flags(worker)
    worker.add_argument(
        "--max-in-flight",
        type=int,
        default=Tuning().max_in_flight,
        help=f"messages held at once: waiting for their instant or executing (default {Tuning().max_in_flight:,})",
    )
    worker.add_argument(
        "--max-connections-per-host",
        type=int,
        default=Tuning().max_connections_per_host,
        help="connections to one target host at once, per worker process: the most a webhook sees from each "
        f"worker (default {Tuning().max_connections_per_host:,}; lowered to fit the open-files limit)",
    )
    worker.add_argument(
        "--receive-batch", type=int, default=None, help="messages per receive (default: 250 embedded, 100 aws)"
    )
    worker.add_argument("--receivers", type=int, default=None, help="concurrent receives (default: 2 embedded, 8 aws)")
    worker.add_argument("--wait-s", type=float, default=None, help="long-poll wait (default: 1 embedded, 20 aws)")
    worker.add_argument("--worker-id", help="name recorded in each attempt (default: host:pid)")
    worker.add_argument(
        "--visibility-s",
        type=int,
        default=60,
        help="hide a received message this long before its run is leased; runs with longer leases extend it "
        "(default 60: a run whose worker dies is retried after max(lease, this))",
    )
    worker.add_argument(
        "--allow-loopback", action="store_true", help="HTTP targets may reach 127.0.0.0/8 and ::1 (local use)"
    )
    worker.add_argument(
        "--allow-private", action="store_true", help="HTTP targets may reach private and reserved networks"
    )
    worker.set_defaults(func=run_worker)

    reaper: argparse.ArgumentParser = subparsers.add_parser(
        "reaper", help="requeue lost runs, bury poison runs and alert owners, until SIGTERM/SIGINT"
    )
    add_engine_flags(reaper)
    reaper.add_argument("--interval-s", type=float, default=60.0, help="seconds between passes (default 60)")
    reaper.set_defaults(func=run_reaper)


def run_worker(args: argparse.Namespace) -> int:
    configure_logging()
    collect_rarely()
    # The event loop thread is busy most of the time; every engine call on the thread pool gives up
    # the GIL around SQLite or socket I/O and then waits up to the switch interval (5 ms by default)
    # to get it back. Measured: a 5,000-run batch took 35% less wall time at 0.5 ms.
    sys.setswitchinterval(0.0005)
    # the flags add to PUNCTUAL_TARGET_ALLOW_*: one policy for the API's check and the worker's
    overrides = {
        "target_allow_loopback": args.allow_loopback or None,
        "target_allow_private": args.allow_private or None,
    }
    runtime = Runtime(*engine_from_settings(settings_from_args(args, **overrides)))
    stop = stop_event_on_signals()
    local = runtime.settings.engine == "embedded"
    connections = connections_within_open_files(args.max_connections_per_host)
    if connections < args.max_connections_per_host:
        logging.getLogger("punctual.worker").warning(
            "the open-files limit allows %d connections per host, not %d: raise it (ulimit -n) for slow webhooks",
            connections,
            args.max_connections_per_host,
        )
    tuning = Tuning(
        max_in_flight=args.max_in_flight,
        max_connections_per_host=connections,
        receive_batch=args.receive_batch or (250 if local else 100),
        receivers=args.receivers or (2 if local else 8),
        wait_s=args.wait_s if args.wait_s is not None else (1.0 if local else 20.0),
    )
    worker = runtime.worker(tuning=tuning, visibility_s=args.visibility_s, worker_id=args.worker_id)
    try:
        worker.run(stop)
    finally:
        runtime.close()
    return 0


def run_reaper(args: argparse.Namespace) -> int:
    configure_logging()
    runtime = Runtime(*engine_from_settings(settings_from_args(args)))
    stop = stop_event_on_signals()
    try:
        runtime.reaper(interval_s=args.interval_s).run(stop)
    finally:
        runtime.close()
    return 0
