"""Process-wide settings for the processes that move runs: the worker, the scheduler, ``punctual dev``.

**The cyclic garbage collector.** A burst allocates a few dozen objects per run (messages,
leases, requests, futures) and holds thousands of runs in flight. With CPython's default
thresholds (700, 10, 10) the collector ran ~1,500 young and a dozen full collections per 20,000
runs, each full one walking every live object: measured in-process, 79 µs of a worker's CPU per
run, a quarter of it (docs/decisions/0105). Our objects form few reference cycles (they
are freed by reference counting), so collections are made rare instead:

- ``gc.freeze()`` after start-up moves the imported modules, classes and settings out of the
  collector's sight: they live as long as the process;
- the young generation is collected every 50,000 allocations instead of 700, and the older ones
  20 and 100 times less often than that. Cyclic garbage still goes, later: memory stays bounded.

Called once, early, by ``punctual worker``, ``punctual scheduler``, ``punctual dev`` and the worker
and scheduler Lambdas; never by the library itself (an application embedding the port keeps its
own collector settings).
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 50_000
MIDDLE_THRESHOLD = 20
OLD_THRESHOLD = 100


def collect_rarely() -> None:
    """Freeze what start-up created and raise the collector's thresholds (see the module docstring)."""
    gc.collect()  # what start-up left as garbage goes now, not into the frozen generation
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
