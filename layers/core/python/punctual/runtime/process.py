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


# File descriptors a worker keeps for everything but its target connections: the store, the
# queue, logs, the thread pool's sockets, hosts other than the busiest one.
OTHER_FILES = 1_024


def connections_within_open_files(wanted: int) -> int:
    """Raise this process's soft limit of open files to its hard limit, and return how many
    connections per host fit under it (``wanted`` at most, with :data:`OTHER_FILES` kept for the
    rest). A worker whose limit is lower than its cap would fail its calls with "too many open
    files" in the middle of a burst; it calls fewer hosts at once instead, and says so."""
    try:
        import resource
    except ImportError:  # not POSIX: nothing to raise, nothing known
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, wanted + OTHER_FILES)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return max(1, min(wanted, soft - OTHER_FILES))
