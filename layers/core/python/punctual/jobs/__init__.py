"""The job service: what the API and the CLI do to jobs and runs, with no HTTP and no boto3.

Owns create/list/get/update/pause/resume/trigger/delete and run listings for one owner
(``service``), and turning pydantic validation errors into Punctual's error details
(``validation``). May import: the kernels, ``punctual.scheduling`` (cron validation, planning of
manual runs) and ``punctual.execution.targets.policy`` (the SSRF check at creation).
"""
