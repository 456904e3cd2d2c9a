"""``punctual scheduler``: one long-running scheduler instance (Fargate, a VM, a laptop).

It exits with status 1 when its ticks keep achieving nothing (``PUNCTUAL_SCHEDULER_MAX_FAILED_TICKS``
in a row; ``punctual.scheduling.health``): a supervisor (ECS, systemd) restarts it, and the restarts
show. Each failure is logged at error level as it happens.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from typing import Any

from punctual.cli.common import (
    add_engine_flags,
    configure_logging,
    engine_from_settings,
    settings_from_args,
    stop_event_on_signals,
)
from punctual.config import Settings
from punctual.metrics import InMemoryMetrics
from punctual.runtime.assembly import Runtime
from punctual.runtime.process import collect_rarely
from punctual.scheduling.health import SchedulerFailing
from punctual.scheduling.scheduler import options_from_settings
from punctual.scheduling.shards import OwnershipOptions


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "scheduler",
        help="run one scheduler instance until SIGTERM/SIGINT (releases its shard leases on stop); exits 1 when "
        "PUNCTUAL_SCHEDULER_MAX_FAILED_TICKS ticks in a row (default 30) failed entirely",
    )
    add_engine_flags(parser)
    parser.add_argument("--instance", type=int, default=0, help="this instance's index (prefers shards %% N == i)")
    parser.add_argument("--instances", type=int, default=1, help="number of instances in the fleet")
    # the defaults shown are the ones in force (Settings, OwnershipOptions), never a copy that drifts
    lookahead = Settings.model_fields["lookahead_ms"].default
    parser.add_argument("--lookahead-ms", type=int, help=f"claim this far ahead (default {lookahead})")
    parser.add_argument("--lease-ttl-ms", type=int, help=f"shard lease length (default {OwnershipOptions().ttl_ms})")
    parser.add_argument("--owner", help="this instance's name in shard leases (default: random)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    configure_logging()
    collect_rarely()
    runtime = Runtime(*engine_from_settings(settings_from_args(args, lookahead_ms=args.lookahead_ms)))
    engine = runtime.engine
    stop = stop_event_on_signals()
    options = options_from_settings(runtime.settings)
    if args.lease_ttl_ms:
        ttl = args.lease_ttl_ms
        ownership = OwnershipOptions(ttl_ms=ttl, renew_every_ms=max(100, ttl // 3))
        options = dataclasses.replace(options, ownership=ownership)
    scheduler = runtime.scheduler(
        metrics=InMemoryMetrics(), options=options, owner=args.owner, instance=args.instance, instances=args.instances
    )
    try:
        scheduler.run(stop)
    except SchedulerFailing as exc:
        logging.getLogger("punctual.scheduler").error("%s; exiting with status 1", exc)
        return 1
    finally:
        engine.close()
    return 0
