"""Reading back documents from storage: the STORED validation context and :class:`StoredReader`.

A job is validated in full when it is written (the API, the CLI, bulk loads): a document an engine
reads back was written by a model that passed those checks. The worker reads every job of a burst
again, and re-running the checks that only refuse input (a cron text, a payload's depth and size,
a URL's host) cost more than parsing the document itself; with a large payload, much more. Types,
enums and bounds are still checked by pydantic's own parser on every read.

Every validator of a stored model starts with ``if is_stored(info): return value`` (it only
refuses input, or the stored document already holds the value it would make). So under STORED a
validator changes nothing, and :class:`StoredReader` leaves them out altogether: it parses with
the model's own schema minus its before/after validators, which is what ``model_validate_json(doc,
context=STORED)`` returns, without calling eight Python functions per job (a third of the parse).
tests/unit/test_model_stored.py proves both: each left-out validator returns its value untouched
under STORED, and the reader's model equals the one the full validation gives.
"""

from __future__ import annotations

from typing import Any, Final, Generic, TypeVar, cast

from pydantic import BaseModel, ValidationInfo
from pydantic_core import SchemaValidator

STORED: Final[dict[str, bool]] = {"stored": True}

M = TypeVar("M", bound=BaseModel)

# Validators that run before or after an inner schema (field_validator, model_validator and
# BeforeValidator/AfterValidator): left out, the inner schema remains.
_LEFT_OUT = frozenset({"function-before", "function-after"})


def is_stored(info: ValidationInfo) -> bool:
    """Whether the document being validated was read back from storage (see the module docstring)."""
    context: Any = info.context
    return context is STORED


class StoredReader(Generic[M]):
    """Parses stored documents of ``model`` with its schema minus the validators STORED skips.

    The result is an instance of ``model``, equal to ``model.model_validate_json(doc,
    context=STORED)``; a document with a wrong type, enum or bound still raises ValidationError.
    The schema is built on first use (nothing runs at import).
    """

    def __init__(self, model: type[M]) -> None:
        self.model = model
        self._validator: SchemaValidator | None = None
        self._list: SchemaValidator | None = None

    def json(self, doc: str | bytes) -> M:
        """The model of a stored JSON document."""
        return cast(M, (self._validator or self.validator()).validate_json(doc, context=STORED))

    def json_list(self, doc: str | bytes) -> list[M]:
        """The models of a JSON array of stored documents, in one parse (one call for a batch)."""
        return cast(list[M], (self._list or self.list_validator()).validate_json(doc, context=STORED))

    def python(self, data: Any) -> M:
        """The model of a stored document already decoded (e.g. from DynamoDB attributes)."""
        return cast(M, (self._validator or self.validator()).validate_python(data, context=STORED))

    def validator(self) -> SchemaValidator:
        if self._validator is None:
            schema = self.model.__pydantic_core_schema__
            self._validator = SchemaValidator(cast(Any, without_validators(schema)), schema.get("config"))
        return self._validator

    def list_validator(self) -> SchemaValidator:
        if self._list is None:
            schema = self.model.__pydantic_core_schema__
            items = {"type": "list", "items_schema": without_validators(schema)}
            self._list = SchemaValidator(cast(Any, items), schema.get("config"))
        return self._list


def without_validators(schema: Any) -> Any:
    """A copy of a pydantic core schema with every before/after validator replaced by its inner schema."""
    if isinstance(schema, dict):
        if _left_out(schema):
            inner = without_validators(schema["schema"])
            if "ref" in schema:  # a model in the definitions (e.g. a member of a tagged union): keep its name
                inner = {**inner, "ref": schema["ref"]}
            return inner
        return {key: without_validators(value) for key, value in schema.items()}
    if isinstance(schema, list):
        return [without_validators(item) for item in schema]
    return schema


def validators_left_out(schema: Any) -> list[Any]:
    """The validator functions :func:`without_validators` leaves out of ``schema`` (for the tests)."""
    found: list[Any] = []
    if isinstance(schema, dict):
        if _left_out(schema):
            found.append(schema["function"]["function"])
        for value in schema.values():
            found.extend(validators_left_out(value))
    elif isinstance(schema, list):
        for item in schema:
            found.extend(validators_left_out(item))
    return found


def _left_out(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")  # a dict when it is the schema of a field named "type"
    return isinstance(kind, str) and kind in _LEFT_OUT
