"""Bounds on every field a user submits or a run records (part of the contract, documented in
``docs/decisions/0004``), and the strictness every submitted model shares."""

from __future__ import annotations

from pydantic import ConfigDict

MAX_PAYLOAD_BYTES = 8 * 1024  # payload rides in the job item; every claim pays for its size
MAX_PAYLOAD_DEPTH = 32  # DynamoDB allows 32 levels of nesting in an item
MAX_TIMEOUT_S = 43_200  # SQS visibility maximum (12 h); Lambda workers cap at 15 min (docs)
MAX_RETRIES = 20
MAX_JITTER_S = 600  # a jittered dispatch must fit in one SQS delay (900 s) with the lookahead
MAX_BACKFILL = 100
MAX_HEADERS = 20
REDACTED = "[redacted]"  # what the API shows for a secret header's value
MAX_SECRET_CHARS = 4096  # a secret header's value as sent (stored sealed, which is longer: up to 8192)
# The whole spec as compact JSON. Every claim rewrites the job's item, and DynamoDB charges a write
# by the item's size (1 unit per KB): a job under 1 KB claims for 3 units (1 + 2 for the due index
# key), this bound caps the worst claim at 2 + 11 (the item adds its state to the spec) where 20
# headers of 4 KiB made it ~93 (docs/decisions/0053).
MAX_JOB_BYTES = 10 * 1024
MAX_ERROR_CHARS = 1_000  # one attempt's error text
MAX_EXCERPT_CHARS = 512  # one attempt's response excerpt
MAX_ATTEMPTS_KEPT = 25  # attempts[] on a run (max_retries + 1 plus takeovers), oldest dropped
MAX_UPSTREAMS = 10  # jobs one job may depend on (bounds a release's read and the release record)

# Submitted models refuse unknown fields and strip whitespace around strings.
STRICT = ConfigDict(extra="forbid", str_strip_whitespace=True)


def truncate(text: str | None, limit: int) -> str | None:
    """Bound a log string, marking the cut so readers know it was cut."""
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 3] + "..."
