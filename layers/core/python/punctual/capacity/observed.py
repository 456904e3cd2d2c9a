"""What the stack holds that AWS prices by the piece, as the CDK app synthesizes it: the metrics its
alarms read (a standard alarm is priced per metric: a metric-math alarm over n metrics costs n) and
its customer-managed KMS keys.

Counted from the synthesized templates: ``tests/infra/test_observed_counts.py`` synthesizes the
stacks of the deploy lines (each worker tier, with and without the open index) and asserts these
equal what it counts, so a new alarm or key fails there until it is priced here.
"""

from __future__ import annotations

# (open_index, fargate tier) -> metrics read by the stack's alarms
# (the jobs' by_calendar and the leases' outbox index, 2026-12-01, brought 2 metrics each)
ALARM_METRICS = {
    (True, False): 43,
    (False, False): 41,
    (True, True): 47,
    (False, True): 45,
}
KMS_KEYS = 3  # the SNS topics' key, the sealed secrets' key, the HMAC signing key


def alarm_metrics(*, open_index: bool, fargate: bool) -> int:
    return ALARM_METRICS[open_index, fargate]


def kms_keys() -> int:
    return KMS_KEYS
