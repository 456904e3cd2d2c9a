"""Local serving: the API (and, in ``punctual dev``, every component) on one machine.

May import: the kernels and ``punctual.api``. Not shipped in the Lambda layer.
"""
