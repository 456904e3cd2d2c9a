"""Execution: a dispatch message becomes a leased attempt, a target call and a finish.

Owns the per-message protocol (``delivery``), what finishing an attempt writes (``changes``), the
outcomes and options of a delivery (``options``), the long-running worker (``worker``; its loop in
``loop``, its batched steps in ``batch``), the Lambda SQS adapter (``sqs_events``) and the targets
(``targets/``: HTTP with its SSRF policy, AWS kinds). May import: the kernels, ``punctual.runs``,
``punctual.dependencies`` (releases), ``punctual.tenancy`` (the admission gate),
``punctual.reaping`` (the long-running worker runs a reaper pass) and, in the Lambda adapter only,
the aws engine's message codec.
"""
