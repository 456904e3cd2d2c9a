"""The rules beyond cron and time zone that decide a job's times: its DST policy.

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
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


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


# -- the stored form ------------------------------------------------------------------------------
# The due index carries a job's timing rules to the claim as one small text attribute (``timing``),
# absent for a job that keeps the defaults: such jobs pay not a byte more per claim. Every other job
# pays a few bytes of it on each claim's write, so it is terse: ``r=<code>;s=<code>``, each part only
# when set (``r=l``: dst_repeated once_last; ``s=k``: dst_skipped skip).
_REPEATED_CODES = {DstRepeated.ONCE_FIRST: "f", DstRepeated.ONCE_LAST: "l", DstRepeated.TWICE: "t"}
_SKIPPED_CODES = {DstSkipped.SHIFT: "h", DstSkipped.SKIP: "k"}
_REPEATED_BY_CODE = {code: value for value, code in _REPEATED_CODES.items()}
_SKIPPED_BY_CODE = {code: value for value, code in _SKIPPED_CODES.items()}


def timing_text(dst: DstPolicy) -> str | None:
    """The stored text of ``dst``; None when every field is the default."""
    parts = []
    if dst.repeated is not None:
        parts.append("r=" + _REPEATED_CODES[dst.repeated])
    if dst.skipped is not None:
        parts.append("s=" + _SKIPPED_CODES[dst.skipped])
    return ";".join(parts) or None


def read_timing(text: str | None) -> DstPolicy:
    """The policy :func:`timing_text` wrote (None: the defaults). Raises ValueError on a bad text."""
    if not text:
        return CRON_RULE
    fields = dict(part.split("=", 1) for part in text.split(";"))
    try:
        repeated, skipped = fields.get("r"), fields.get("s")
        return DstPolicy(
            repeated=None if repeated is None else _REPEATED_BY_CODE[repeated],
            skipped=None if skipped is None else _SKIPPED_BY_CODE[skipped],
        )
    except KeyError as exc:
        raise ValueError(f"stored timing {text!r} is not one this version writes") from exc
