"""Benchmarks behind ``punctual bench``: each prints readable figures, or one JSON object with ``--json``.

May import anything in the package; nothing imports it but ``punctual.cli``. Not shipped in the
Lambda layer.
"""
