"""The conformance tier reuses the e2e stack: the local API over HTTP on 127.0.0.1, on both engines."""

from tests.e2e.conftest import stack

__all__ = ["stack"]
