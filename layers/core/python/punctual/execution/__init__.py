"""Execution: a dispatch message becomes a leased attempt, a target call and a finish.

Owns the per-message protocol (``delivery``), the long-running worker (``worker``), the Lambda
SQS adapter (``sqs_events``) and the targets (``targets/``: HTTP with its SSRF policy, AWS kinds).
May import: the kernels, ``punctual.runs``, ``punctual.reaping`` (the long-running worker runs a
reaper pass) and, in the Lambda adapter only, the aws engine's message codec.
"""
