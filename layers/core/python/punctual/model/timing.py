"""The rules beyond cron and time zone that decide a job's times: its DST policy and its calendar.

A cron schedule names wall-clock times in the job's zone. Twice a year most zones make some of
them ambiguous (the repeated hour, when clocks fall back) or impossible (the skipped hour, when
they spring forward). Cron (Vixie, Debian, cronsim) has one fixed answer, by the kind of job:

==================  =====================================  =============================
job                 repeated hour (fall back)              skipped hour (spring forward)
==================  =====================================  =============================
fixed-time          once, at the first occurrence          once, at the first instant after the gap
interval (``*``)    at both occurrences (elapsed time)     not at all (elapsed time)
==================  =====================================  =============================

(an *interval job* is one whose hour field starts with ``*``: ``*``, ``*/n``, ``@hourly``). A job
may choose instead, per case: ``dst_repeated`` and ``dst_skipped``. Left unset (None), each keeps
cron's answer for the job's kind, so a job stored before the policy existed runs as it always did.

A job may also name a calendar of its owner's (``punctual.model.calendars``): ``calendar: {name,
mode}``. A time of the job's that falls on a day the calendar excludes is skipped, or moved to the
next or previous business day at the same local time (``punctual.scheduling.timeline``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, Field

from punctual.model.bounds import STRICT
from punctual.model.limits import DEFAULT_PRIORITY

# A calendar's name: letters, digits, '.', '_' and '-' (never ';' or ':', which the stored timing uses)
CALENDAR_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
CalendarName = Annotated[str, Field(min_length=1, max_length=64, pattern=CALENDAR_NAME_PATTERN)]


class DstRepeated(StrEnum):
    """What a job does at a wall time that happens twice (clocks fall back)."""

    ONCE_FIRST = "once_first"  # run once, at the first occurrence (summer time): cron's rule for fixed-time jobs
    ONCE_LAST = "once_last"  # run once, at the second occurrence (standard time)
    TWICE = "twice"  # run at both occurrences, an hour (or the shift) apart: cron's rule for interval jobs


class DstSkipped(StrEnum):
    """What a job does at a wall time that never happens (clocks spring forward)."""

    # run at the first instant after the gap (once, however many of its times fell in the gap):
    # cron's rule for fixed-time jobs (``30 2 * * *`` runs at 03:00 on the night New York skips 02:00-02:59)
    SHIFT = "shift"
    SKIP = "skip"  # no run for that time: cron's rule for interval jobs


@dataclass(frozen=True, slots=True)
class DstPolicy:
    """A job's choice for each DST case; None keeps cron's rule for the job's kind (see the module)."""

    repeated: DstRepeated | None = None
    skipped: DstSkipped | None = None

    def resolved(self, interval: bool) -> tuple[DstRepeated, DstSkipped]:
        """The policy in force for a fixed-time (``interval`` False) or an interval job."""
        repeated = self.repeated or (DstRepeated.TWICE if interval else DstRepeated.ONCE_FIRST)
        skipped = self.skipped or (DstSkipped.SKIP if interval else DstSkipped.SHIFT)
        return repeated, skipped


CRON_RULE = DstPolicy()  # what a job that sets neither field gets: cron's own answers


class CalendarMode(StrEnum):
    """What a job does with a time that falls on a day its calendar excludes."""

    SKIP = "skip"  # no run: the time is recorded as a cancelled run, its note saying which calendar and day
    NEXT_BUSINESS_DAY = "next_business_day"  # run on the next day the calendar allows, at the same local time
    PREVIOUS_BUSINESS_DAY = "previous_business_day"  # run on the previous such day, at the same local time


class JobCalendar(BaseModel):
    """The calendar a job's times are checked against, and what an excluded day does to them."""

    model_config = STRICT
    name: CalendarName
    mode: CalendarMode = CalendarMode.SKIP


# -- the stored form ------------------------------------------------------------------------------
# The due index carries a job's timing rules to the claim as one small text attribute (``timing``),
# absent for a job that keeps the defaults: such jobs pay not a byte more per claim. Every other job
# pays a few bytes of it on each claim's write, so it is terse: ``r=<code>;s=<code>;p=<n>;o=<ms>;c=<code>:<name>``,
# each part only when set (``r=l``: dst_repeated once_last; ``s=k``: dst_skipped skip; ``p=9``: the job's
# priority, which its messages carry, only when not the default 5; ``c=n:us-bank``: calendar us-bank,
# next_business_day; ``o``: a one-time job's run_at in epoch ms, kept with a calendar only: its due time
# may be a time moved from it). The calendar comes last: its name is the rest.
_REPEATED_CODES = {DstRepeated.ONCE_FIRST: "f", DstRepeated.ONCE_LAST: "l", DstRepeated.TWICE: "t"}
_SKIPPED_CODES = {DstSkipped.SHIFT: "h", DstSkipped.SKIP: "k"}
_MODE_CODES = {CalendarMode.SKIP: "s", CalendarMode.NEXT_BUSINESS_DAY: "n", CalendarMode.PREVIOUS_BUSINESS_DAY: "p"}
_REPEATED_BY_CODE = {code: value for value, code in _REPEATED_CODES.items()}
_SKIPPED_BY_CODE = {code: value for value, code in _SKIPPED_CODES.items()}
_MODE_BY_CODE = {code: value for value, code in _MODE_CODES.items()}


@dataclass(frozen=True, slots=True)
class Timing:
    """A job's timing rules as the due index carries them."""

    dst: DstPolicy = CRON_RULE
    calendar: JobCalendar | None = None
    once: int | None = None  # a one-time calendar job's run_at (epoch ms)
    priority: int = DEFAULT_PRIORITY  # the job's priority (its messages carry it: Dispatch.priority)


DEFAULT_TIMING = Timing()


def timing_text(
    dst: DstPolicy, calendar: JobCalendar | None = None, once: int | None = None, priority: int = DEFAULT_PRIORITY
) -> str | None:
    """The stored text of a job's rules; None when every one is the default. ``once`` (a one-time
    job's run_at) is kept only with a calendar."""
    parts = []
    if dst.repeated is not None:
        parts.append("r=" + _REPEATED_CODES[dst.repeated])
    if dst.skipped is not None:
        parts.append("s=" + _SKIPPED_CODES[dst.skipped])
    if priority != DEFAULT_PRIORITY:
        parts.append(f"p={priority}")
    if calendar is not None:
        if once is not None:
            parts.append(f"o={once}")
        parts.append(f"c={_MODE_CODES[calendar.mode]}:{calendar.name}")
    return ";".join(parts) or None


def read_timing(text: str | None) -> Timing:
    """The rules :func:`timing_text` wrote (None: the defaults). Raises ValueError on a bad text."""
    if not text:
        return DEFAULT_TIMING
    head, _, calendar = text.partition("c=")
    fields = dict(part.split("=", 1) for part in head.split(";") if part)
    try:
        repeated, skipped = fields.get("r"), fields.get("s")
        dst = DstPolicy(
            repeated=None if repeated is None else _REPEATED_BY_CODE[repeated],
            skipped=None if skipped is None else _SKIPPED_BY_CODE[skipped],
        )
        priority = int(fields.get("p", DEFAULT_PRIORITY))
        if not calendar:
            return Timing(dst, priority=priority)
        mode, _, name = calendar.partition(":")
        once = int(fields["o"]) if "o" in fields else None
        return Timing(dst, JobCalendar.model_construct(name=name, mode=_MODE_BY_CODE[mode]), once, priority)
    except KeyError as exc:
        raise ValueError(f"stored timing {text!r} is not one this version writes") from exc
