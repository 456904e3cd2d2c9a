"""Per-owner ceilings: what one owner can do, whatever the deployment's size.

Sharding spreads the load of many owners over partitions; a few records are one item (or one
index partition) per owner, and one DynamoDB partition (a single item, at most) takes 1,000 write
units a second. These are the ceilings that follow, each checked against the busiest owner's peak
(``Load.max_owner_runs_per_second``; by default the whole peak, as if one owner had it all):

- ``stats_counters``: GET /stats' counters, 8 items per owner and minute, one write unit per
  finished run: 8,000 runs/s per owner (the plan drops the counters above it, ``plan``).
- ``one_time_jobs``: a one-time job's claim sets its status to ``completed``, which the ``by_owner``
  index projects: one index write in the owner's partition per claim, ~1,000 one-time runs/s per
  owner coming due at once (cron jobs' claims leave that index alone).
- ``max_runs_per_minute``: an owner's rate record is one item, written once per start (or wait):
  1,000 starts/s, so a limit above 60,000 a minute cannot be honoured.
- ``max_concurrency``: an owner's slot item names every run holding a slot (18 per KB, measured),
  and each take and release writes the whole item: at ``max_concurrency`` C a run costs
  2 x ceil(C / 18) write units on one item, 1,000 / that runs/s (17 at C = 500). Refused takes
  while the owner waits cost the same again, so the figure is an upper bound.

Owners without limits pay nothing for the last two. Pure arithmetic.
"""

from __future__ import annotations

import math

from punctual.capacity.constants import value
from punctual.capacity.figures import OwnerCeiling, QuotaWarning
from punctual.capacity.load import Load

STATS_COUNTER_ITEMS = 8  # GET /stats: counter items per owner and minute (punctual.engines.aws.stats)


def owner_peak(load: Load) -> int:
    """The busiest owner's runs/s at the peak: as given, else the whole peak."""
    given = load.max_owner_runs_per_second
    return load.peak_runs_per_second if given is None else min(given, load.peak_runs_per_second)


def stats_counter_ceiling() -> int:
    return int(STATS_COUNTER_ITEMS * value("ddb_partition_wru"))


def slot_ceiling(max_concurrency: int) -> float:
    """Runs/s one owner with ``max_concurrency`` can start: its slot item's write units per run."""
    units_per_write = math.ceil(max_concurrency / value("slot_holders_per_kb"))
    return value("ddb_partition_wru") / (2 * units_per_write)


def owner_ceilings(load: Load, *, stats_counters: bool, warnings: list[QuotaWarning]) -> list[OwnerCeiling]:
    """Every per-owner ceiling, with a warning for each the busiest owner's peak exceeds."""
    busiest = owner_peak(load)
    item = value("ddb_partition_wru")
    ceilings = [
        OwnerCeiling(
            "one_time_jobs",
            item,
            "one owner's one-time jobs (run_at) due in the same second (each claim rewrites the owner's by_owner"
            " index entry, one partition)",
        ),
        OwnerCeiling(
            "max_runs_per_minute",
            item,
            "an owner with max_runs_per_minute (one rate record, one write per start or wait: a limit above"
            f" {int(item * 60):,} a minute cannot be honoured)",
        ),
    ]
    if stats_counters:
        ceilings.insert(
            0,
            OwnerCeiling(
                "stats_counters",
                stats_counter_ceiling(),
                f"an owner's GET /stats counters ({STATS_COUNTER_ITEMS} items, one write per finish; above it they"
                " throttle and miss runs)",
            ),
        )
    if load.owner_max_concurrency is not None:
        c = load.owner_max_concurrency
        ceilings.append(
            OwnerCeiling(
                "max_concurrency",
                round(slot_ceiling(c), 1),
                f"an owner with max_concurrency {c:,} (its slot item: 2 x"
                f" {math.ceil(c / value('slot_holders_per_kb'))} write units per run, more while runs wait for a slot)",
            )
        )
    who = "the busiest owner" if load.max_owner_runs_per_second is not None else "one owner (assumed: the whole peak)"
    for ceiling in ceilings:
        if busiest > ceiling.runs_per_second and ceiling.name != "stats_counters":  # stats: the plan's own warning
            warnings.append(
                QuotaWarning(
                    f"owner_{ceiling.name}",
                    f"{who} runs {busiest:,}/s at the peak, above the ceiling of {ceiling.runs_per_second:,g} runs/s"
                    f" for {ceiling.applies_to}: such an owner is held to the ceiling; spread its load over owners,"
                    " or give --max-owner-runs-per-second if no owner is that busy (docs/capacity.md)",
                )
            )
    return ceilings
