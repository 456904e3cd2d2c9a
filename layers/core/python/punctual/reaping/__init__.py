"""Reaping: nothing stays open forever, and every dead run alerts its owner.

Owns the reaper pass (runs past their deadline: resend, retry or bury) and the dead-letter queue.
May import: the kernels and ``punctual.runs``. Never ``punctual.execution``: the worker may run
a reaper pass, so the arrow goes only that way.
"""
