"""The validation context of a document read back from storage.

A job is validated in full when it is written (the API, the CLI, bulk loads): a document an engine
reads back was written by a model that passed those checks. The worker reads every job of a burst
again, and re-running the checks that only refuse input (a cron text, a payload's depth and size,
a URL's host) cost more than parsing the document itself; with a large payload, much more. Types,
enums and bounds are still checked by pydantic's own parser on every read.

Usage: ``Job.model_validate_json(doc, context=STORED)``; a validator that only refuses input
starts with ``if is_stored(info): return value``. A validator that changes its value may skip
too, since the stored document holds the changed value.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import ValidationInfo

STORED: Final[dict[str, bool]] = {"stored": True}


def is_stored(info: ValidationInfo) -> bool:
    """Whether the document being validated was read back from storage (see the module docstring)."""
    context: Any = info.context
    return context is STORED
