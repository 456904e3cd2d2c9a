"""Punctual: a distributed job scheduler that runs serverless on AWS (or on one machine).

Everything lives in this package; Lambda handlers and the CLI only wire it up.
"""

__version__ = "0.1.0"
