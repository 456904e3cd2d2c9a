"""The ``punctual`` command. Each sub-command lives in its own module with a ``register`` function;
the job and run commands (``human``) share an HTTP client for the API (``client``) and their
printed tables (``output``).

May import anything in the package; nothing imports it. Not shipped in the Lambda layer.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from punctual.errors import PunctualError

# Modules under punctual.cli that contribute sub-commands; each has register(subparsers).
_COMMAND_MODULES = ("bench", "scheduler", "worker", "dev", "human", "capacity", "console", "tenants", "calendars")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="punctual", description="Punctual: a distributed job scheduler.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(f"punctual.cli.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
    except PunctualError as exc:
        print(f"punctual: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return result


if __name__ == "__main__":
    sys.exit(main())
