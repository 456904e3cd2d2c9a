"""``make test``'s pytest run, as two pytest processes at once: the tests that mostly wait beside the rest.

A few end-to-end files (and tests) spend most of their time waiting for instants a few seconds
away (a minute boundary, a claim, a restart), with little CPU in use: run one after the other with
everything else, those waits were ~5 of the ~25 minutes CI took (its limit is 30). Here they run in
a second pytest process while the first runs the rest, so their waits overlap the CPU-bound tiers.

Each process writes its own report; the first streams to the terminal, the second's is printed
when both are done. The exit status is the first non-zero one (0 when both passed). Arguments
after the script's name go to both processes (``-x``, ``-k``, ...).

Why not pytest-xdist: its workers each build every session fixture they meet (the CDK stacks are
synthesized once per session, ~1 minute each), and the tiers' fixtures are not written for it.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

# Files that mostly wait (seconds-away instants on shifted clocks, a one-minute bench run): run beside the rest.
WAITING = (
    "tests/e2e/test_run_contract_http.py",
    "tests/e2e/test_bench_minute.py",
    # two backlogs filling a 20-a-minute rate limit: ~75 s each of waiting for the minute to turn
    "tests/faults/test_tenant_limits.py::test_max_runs_per_minute_is_a_ceiling_that_a_backlog_fills",
)
NO_TESTS = 5  # pytest's exit status when nothing was collected
# --durations: the slowest tests of each process, printed for the budget
PYTEST = (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=30")


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parent.parent
    missing = [path for path in WAITING if not (root / path.split("::")[0]).is_file()]
    if missing:
        print(f"tests/parallel.py names files that do not exist: {missing}", file=sys.stderr)
        return 2
    # a whole file is left out of the first process, a test (file::name, every parameter) deselected
    ignores = [f"--deselect={path}" if "::" in path else f"--ignore={path}" for path in WAITING]
    with tempfile.TemporaryFile(mode="w+b") as report:
        waiting = subprocess.Popen(
            [*PYTEST, *argv, *WAITING], cwd=root, stdin=subprocess.DEVNULL, stdout=report, stderr=subprocess.STDOUT
        )
        try:
            rest = subprocess.run([*PYTEST, *argv, *ignores], cwd=root, stdin=subprocess.DEVNULL, check=False)
        finally:
            waited = waiting.wait()
        report.seek(0)
        print(f"\n==== the waiting files, run beside the rest ({', '.join(WAITING)}) ====", flush=True)
        sys.stdout.buffer.write(report.read())
        sys.stdout.flush()
    for code in (rest.returncode, waited):
        if code not in (0, NO_TESTS):  # a selection (-k, -m) may leave one process nothing to run
            return code
    return rest.returncode if waited == NO_TESTS else waited


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
