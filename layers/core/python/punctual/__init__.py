"""Punctual: a distributed job scheduler that runs serverless on AWS (or on one machine).

Everything lives in this package; Lambda handlers and the CLI only wire it up. The top level
holds the shared kernels (``model``, ``errors``, ``ids``, ``clock``, ``config``, ``port``, ``rules``,
``resources``, ``metrics``, ``numbers``: every top-level module, and the ``model`` and ``port``
packages), which import only each other; each capability is a package whose ``__init__`` says what
it owns and what it may import. ``python -m infra.import_graph`` (run by ``make lint``) refuses any
import cycle between modules and any import of a capability package by a kernel, lazy ones included.
"""

__version__ = "0.1.0"
