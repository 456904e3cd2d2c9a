"""The runtime: assembling and observing the components in a process (Lambda, Fargate, a laptop).

Owns the Powertools metrics adapter (``powertools``). May import anything below it (kernels,
engines, scheduling, execution, reaping, jobs, api); nothing but ``functions/``, ``punctual.cli``
and ``punctual.local`` imports it.
"""
