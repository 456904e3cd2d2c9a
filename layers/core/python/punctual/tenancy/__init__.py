"""Tenancy: per-owner limits and fair dispatch, so one tenant's flood never delays another's runs.

What this package owns:

- ``limits``: an owner's effective limits (its tenant record over the deployment's defaults in
  ``Settings``: ``max_jobs``, ``max_runs_per_minute``, ``max_concurrency``,
  ``api_requests_per_second``, ``weight``), and a short-lived cache of them for hot paths.
- ``service``: what operators and owners do with tenants (``punctual tenants set|get|list``, the
  admin routes, ``GET /limits``: limits and current usage), and the ``max_jobs`` check on create.
- ``admission``: the gate in the worker's lease path. A run of an owner at its ``max_concurrency``
  or over its ``max_runs_per_minute`` waits (its message hidden until its turn, or a short backoff
  for a slot; its note says why); it is never failed and never costs an attempt. Slots are taken
  before the lease and released with the finish; the reaper repairs slots whose runs no longer
  run (:func:`admission.repair_slots`).
- ``keyed``: a job's keyed ``limits`` as more ceilings of the gate, each in its own scope of the
  same records (``customer:{payload.customer_id}``, a literal shared by several jobs, ``{job_id}``).
- ``rates``: ``max_runs_per_minute`` as a ceiling in every sliding 60 s window that a backlog
  fills (evenly spaced starts, turns for waiting runs).
- ``fairness``: the weighted round-robin hand-out across owners of the embedded queue (on AWS,
  SQS fair queues do it: ``MessageGroupId`` = owner).
- ``api_rate``: the per-owner request rate of the API (429 with ``Retry-After``).

The records live in the store (``Store.put_tenant`` ... ``Store.put_rate_state``, on both engines).
Owners without limits pay no extra writes: nothing here writes for them.
"""
