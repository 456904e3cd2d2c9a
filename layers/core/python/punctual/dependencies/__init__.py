"""Job dependencies: a job triggered by runs of other jobs (``depends_on``) instead of a schedule.

Owns:
- ``release``: the one hook called where an upstream run turns terminal (the worker's finish, a
  redelivered finish, the reaper's burial, the dead-letter handler). It offers the run to each
  dependent's release record and, once every upstream has a qualifying run, inserts and sends
  exactly one dependent run whose id is derived from the releasing upstream runs.
- ``links``: validation of ``depends_on`` against the store (upstreams exist and belong to the
  owner, no cycle, no live dependents of a deleted job), each check taken with the write it allows
  as one decision (``Store.decide_edges``), which also keeps the reverse edges and the upstream's
  ``has_dependents`` flag.
- ``graph``: what a dependent waits for, and the upstream/downstream graph of a job.

May import the kernels (model, port, errors, ids, config) and ``scheduling.planning`` (to build
the dispatch of a released run). Never the API, an engine, the worker or the reaper: those call in.
"""
