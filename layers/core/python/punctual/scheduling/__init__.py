"""Scheduling: turning due jobs into runs on the dispatch queue, every second.

Owns the claim sequence (``claim``: insert run → send → advance job), planning (``planning``:
which runs a due job gets, catch-up, jitter, manual runs), shard ownership through leases
(``shards``), the per-second loop (``scheduler``) and cron fire times (``cron``; the cron grammar
itself is the model's, ``model.cron_syntax``).
May import: the kernels (model, errors, ids, clock, config, port, rules, resources, metrics) and
``punctual.runs``. Never an engine: everything goes through the port.
"""
