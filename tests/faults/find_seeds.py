"""Which seeds of the randomized tier break which invariant: the first few per invariant letter.

    .venv/bin/python -m tests.faults.find_seeds --count 300            # embedded
    .venv/bin/python -m tests.faults.find_seeds --engine aws --count 100

Used to prove that the simulation sees a bug (run it on the code before a fix, record the seed in
docs/decisions/0122) and to replay one: ``PUNCTUAL_FAULT_SEED=<seed> pytest tests/faults/test_randomized.py``.
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict

from tests.faults.campaign import run_parallel

_LETTER = re.compile(r"\(([a-h])\)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--engine", choices=("embedded", "aws"), default="embedded")
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--per-letter", type=int, default=3)
    args = parser.parse_args()
    result = run_parallel(args.engine, list(range(args.first, args.first + args.count)))
    found: dict[str, list[str]] = defaultdict(list)
    for problem in result.problems:
        match = _LETTER.search(problem)
        letter = match.group(1) if match else "other"
        if len(found[letter]) < args.per_letter:
            found[letter].append(problem[:300])
    print(f"{result.scenarios} scenarios, {len(result.problems)} violations")
    for letter in sorted(found):
        print(f"== ({letter})")
        print("\n".join(found[letter]))


if __name__ == "__main__":
    main()
