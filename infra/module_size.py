"""Module size: no module of the project's code over :data:`MAX_LINES` lines (run by ``make lint``).

A module is read in one sitting: about 400 lines. One that grows past it is split by
responsibility, along a line a reader would guess, not trimmed (issues 16 and 28). What counts is
every Python module of the ``punctual`` package, of the CDK app (``infra/``) and of the Lambda
handlers (``functions/``); tests are not held to it, and the console's vendored JavaScript is not a
module of ours.

:data:`EXCEPTIONS` names the modules allowed over the limit, each with its reason. The check also
fails when an exception is no longer over the limit (or no longer exists), so the list cannot
outlive its reasons.

``python -m infra.module_size`` fails (exit 1) on either.
"""

from __future__ import annotations

import sys
from pathlib import Path

from infra.import_graph import PACKAGE_ROOT, PROJECT_ROOT, package_modules, report

MAX_LINES = 400
# module -> why it may be over MAX_LINES for now
EXCEPTIONS: dict[str, str] = {}  # none today: each entry names a module and why it may be longer
CODE_DIRS = ("infra", "functions")  # beside the package


def sizes(project: Path = PROJECT_ROOT, package_root: Path = PACKAGE_ROOT) -> dict[str, int]:
    """Lines of every module that counts, by dotted name (``functions/api/handler.py``: ``functions.api.handler``)."""
    paths = dict(package_modules(package_root))
    for folder in CODE_DIRS:
        for path in sorted((project / folder).rglob("*.py")):
            paths[".".join(path.relative_to(project).with_suffix("").parts)] = path
    return {name: len(path.read_text().splitlines()) for name, path in paths.items()}


def oversized(counted: dict[str, int], exceptions: dict[str, str] = EXCEPTIONS) -> dict[str, int]:
    """The modules over :data:`MAX_LINES` that are not exceptions, with their lines."""
    return {name: lines for name, lines in sorted(counted.items()) if lines > MAX_LINES and name not in exceptions}


def stale_exceptions(counted: dict[str, int], exceptions: dict[str, str] = EXCEPTIONS) -> list[str]:
    """The exceptions that are gone or back within :data:`MAX_LINES` (remove them from the list)."""
    return sorted(name for name in exceptions if counted.get(name, 0) <= MAX_LINES)


def main() -> int:
    counted = sizes()
    problems = [
        f"{name} has {lines} lines (at most {MAX_LINES}): split it by responsibility"
        for name, lines in oversized(counted).items()
    ]
    problems += [
        f"{name} is no longer over {MAX_LINES} lines: remove it from EXCEPTIONS" for name in stale_exceptions(counted)
    ]

    def summary() -> str:
        largest = max((lines, name) for name, lines in counted.items() if name not in EXCEPTIONS)
        return (
            f"module size: {len(counted)} modules, none over {MAX_LINES} lines but {len(EXCEPTIONS)} documented"
            f" exception(s); the largest is {largest[1]} ({largest[0]})"
        )

    return report(problems, summary)


if __name__ == "__main__":
    sys.exit(main())
