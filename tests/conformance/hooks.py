"""A schemathesis check of our own: a body valid by the document is refused only by rules it cannot state.

``schemathesis.toml`` lets createJob, updateJob, listJobs and listRuns answer 422 to data the
document calls valid, because some rules are not expressible in JSON Schema (a cron expression, an
IANA zone, run_at in the future, ...). Accepting every 422 also accepted a real mismatch (issue 26
case 8: a target without ``type``, which the document says defaults to ``http``, was refused). This
check reads the 422's details and fails unless every field they name is one of those rules, listed
below with the reason it cannot be in the document. Loaded through ``SCHEMATHESIS_HOOKS`` by
``test_schemathesis.py``; ``--checks all`` runs it with the built-in checks.
"""

from __future__ import annotations

import json
from typing import Any

import schemathesis
from schemathesis.specs.openapi.checks import is_unexpected_http_status_case

# The body rules of POST /jobs and PATCH /jobs/{job_id} that JSON Schema cannot state, by the field
# an error names (a field, or a prefix of one ending in "."), with what its message must say when the
# field alone is ambiguous.
_JOB_BODY: dict[str, str] = {
    "schedule": "",  # the cron syntax and ranges
    "timezone": "",  # an IANA zone the server knows
    "dst_repeated": "",  # a DST policy with a cron schedule only (not with run_at or depends_on)
    "dst_skipped": "",
    "run_at": "",  # in the future, with a UTC offset, before 9999
    "body": "",  # exactly one of schedule, run_at and depends_on (after a merge patch)
    "depends_on": "",  # no dependency cycle
    "depends_on.jobs": "",  # no job named twice
    "retry": "",  # retry.max_backoff_s >= retry.backoff_s
    "payload": "",  # its depth, its size as JSON, no lone surrogate
    "target.url": "",  # the SSRF policy, and a URL a request can be sent to (request_rules)
    "target.headers.": "",  # a header a request can carry (request_rules)
    "target.secret_headers.": "",
    "target.secret_headers": "",  # a [redacted] value naming no stored secret (PATCH)
    "target": "header",  # a header both plain and secret, more than 20 headers in all; nothing else
    "notify.url": "",  # as target.url: the SSRF policy, and a URL a request can be sent to
    "completion": "",  # callback with an http target only (the target's kind is another field)
    "heartbeat_timeout_s": "",  # with completion callback only
}
NOT_IN_THE_DOCUMENT: dict[str, dict[str, str]] = {
    "POST /jobs": _JOB_BODY,
    "PATCH /jobs/{job_id}": _JOB_BODY,
    "GET /jobs": {"cursor": ""},  # only a cursor the API returned
    "GET /jobs/{job_id}/runs": {"cursor": "", "since": ""},  # since must not be after until
    # 'from' before 'to'; more runs match than one call may replay (too_many_runs names 'to' too)
    "POST /runs/replay": {"to": ""},
}


@schemathesis.check
def refused_only_by_rules_the_document_cannot_state(ctx: Any, response: Any, case: Any) -> bool | None:
    meta = case.meta
    if response.status_code != 422 or meta is None or not meta.generation.mode.is_positive:
        return None
    if is_unexpected_http_status_case(case):
        return None
    allowed = NOT_IN_THE_DOCUMENT.get(case.operation.label)
    if allowed is None:
        return None  # positive_data_acceptance refuses any 422 there
    try:
        body = json.loads(response.content)
        details = [(str(d.get("field")), str(d.get("message"))) for d in body["details"]]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise AssertionError(f"a 422 without the error shape: {response.content[:300]!r}") from None
    unexplained = [
        (field, message) for field, message in details or [("(none)", "")] if not _explained(field, message, allowed)
    ]
    if unexplained:
        raise AssertionError(
            "Valid data was refused by a rule the document could state (or states otherwise): "
            + "; ".join(f"{field}: {message}" for field, message in unexplained)
        )
    return None


def _explained(field: str, message: str, allowed: dict[str, str]) -> bool:
    for name, says in allowed.items():
        matches = field.startswith(name) if name.endswith(".") else field == name
        if matches and says in message:
            return True
    return False
