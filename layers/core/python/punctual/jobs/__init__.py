"""The job service: what the API and the CLI do to jobs and runs, with no HTTP and no boto3.

Owns create/list/get/update/pause/resume/delete for one owner (``service``), triggering a job
and reading its runs (``runs``), the checks made before any write: size, timeout,
Idempotency-Key, page limit (``checks``), sealing secret header values (``secrets``), and turning
pydantic validation errors into Punctual's error details (``validation``). May import: the
kernels, ``punctual.scheduling`` (cron validation, planning of manual runs),
``punctual.dependencies`` (``depends_on`` links) and ``punctual.execution.targets.policy`` (the
SSRF check at creation).
"""
