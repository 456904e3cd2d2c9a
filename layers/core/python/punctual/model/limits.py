"""A job's priority and its keyed limits (``priority``, ``limits``): the fields and their key templates.

``priority`` (0-9, default 5) orders an owner's runs where they compete (``punctual.tenancy.admission``);
it never moves one owner ahead of another.

``limits`` are concurrency and rate ceilings keyed by something other than the owner: each entry
names a ``key`` template and ``max_concurrency`` and/or ``max_runs_per_minute``. Every run of every
job of the owner whose key resolves to the same text shares one ceiling. A template is literal text
and placeholders:

- ``{job_id}``: the job's id (a ceiling per job);
- ``{payload.a.b}``: the field ``b`` of the object ``a`` of the job's payload (a ceiling per
  customer, per account, ...). A string is taken as it is, any other JSON value as its compact
  JSON text; a field the payload lacks resolves to the empty text, so such runs share one key
  (they are never left unlimited);
- anything else is literal: ``upstream-api`` shared by several jobs is one budget for all of them.

The syntax is one regular expression (:data:`KEY_PATTERN`), stated in the OpenAPI document too,
so a key the document accepts is never refused. Keys are scoped to the owner: two owners' equal
keys are two ceilings (``punctual.tenancy.keyed``).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from punctual.model.bounds import STRICT
from punctual.model.stored import is_stored

MIN_PRIORITY, DEFAULT_PRIORITY, MAX_PRIORITY = 0, 5, 9
MAX_JOB_LIMITS = 4  # entries of ``limits`` on one job: each is checked on every start of its runs
MAX_KEY_CHARS = 200  # a key template; a resolved key is cut to MAX_RESOLVED_CHARS in notes
MAX_RESOLVED_CHARS = 200
MAX_KEYED_LIMIT = 100_000

_LITERAL = r"[A-Za-z0-9._:/@#=+-]"
_FIELD = r"[A-Za-z0-9_-]{1,64}"
_PLACEHOLDER = r"\{(?:job_id|payload(?:\." + _FIELD + r")+)\}"
KEY_PATTERN = rf"^(?:{_LITERAL}|{_PLACEHOLDER})+$"
_KEY = re.compile(KEY_PATTERN)
_PART = re.compile(r"\{([^{}]*)\}")


def _whole(value: Any, info: ValidationInfo) -> Any:
    """As ``punctual.model.jobs.WHOLE``: a float with no fraction is the integer it is (JSON)."""
    if not is_stored(info) and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


_WHOLE = BeforeValidator(_whole)
Priority = Annotated[
    int,
    Field(
        strict=True,
        ge=MIN_PRIORITY,
        le=MAX_PRIORITY,
        description="0-9, higher first: orders this owner's runs where they compete for a limit",
        examples=[9],
    ),
    _WHOLE,
]
KeyedLimit = Annotated[int, Field(strict=True, ge=1, le=MAX_KEYED_LIMIT), _WHOLE]
LIMITS_EXAMPLE = [
    {"key": "customer:{payload.customer_id}", "max_concurrency": 2},
    {"key": "upstream-api", "max_runs_per_minute": 600},
]


def _both_optional_never_null(schema: dict[str, Any]) -> None:
    """The document's view of :class:`JobLimit`: either number is an integer when given (null is not
    sent), and at least one is given."""
    for name in ("max_concurrency", "max_runs_per_minute"):
        prop = schema["properties"][name]
        kept = {k: v for k, v in prop.items() if k in ("title", "description")}
        schema["properties"][name] = {**kept, "type": "integer", "minimum": 1, "maximum": MAX_KEYED_LIMIT}
    schema["anyOf"] = [{"required": ["max_concurrency"]}, {"required": ["max_runs_per_minute"]}]


class JobLimit(BaseModel):
    """A ceiling shared by every run whose ``key`` resolves to the same text (see the module docstring)."""

    model_config = {**STRICT, "json_schema_extra": _both_optional_never_null}
    key: Annotated[
        str,
        Field(
            min_length=1,
            max_length=MAX_KEY_CHARS,
            description="literal text with {job_id} and {payload.<field>} placeholders",
            examples=["customer:{payload.customer_id}"],
            json_schema_extra={"pattern": KEY_PATTERN},
        ),
    ]
    max_concurrency: KeyedLimit | None = Field(default=None, description="runs of this key executing at once")
    max_runs_per_minute: KeyedLimit | None = Field(default=None, description="starts of this key in any 60 s")

    @field_validator("key")
    @classmethod
    def _valid_key(cls, value: str, info: ValidationInfo) -> str:
        if is_stored(info) or _KEY.match(value):
            return value
        for inner in _PART.findall(value):
            if not re.fullmatch(_PLACEHOLDER, "{" + inner + "}"):
                raise ValueError(
                    f"unknown placeholder {{{inner}}}: use {{job_id}} or {{payload.<field>}}"
                    " (fields of letters, digits, _ and -, joined by dots)"
                )
        raise ValueError(
            "a key is literal letters, digits and ._:/@#=+- with {job_id} and {payload.<field>} placeholders,"
            " and balanced braces"
        )

    @model_validator(mode="after")
    def _a_ceiling(self, info: ValidationInfo) -> JobLimit:
        if not is_stored(info) and self.max_concurrency is None and self.max_runs_per_minute is None:
            raise ValueError("give max_concurrency, max_runs_per_minute or both")
        return self


def resolve_key(template: str, job_id: str, payload: Any) -> str:
    """The key a run of the job ``job_id`` with ``payload`` has under ``template`` (see the module
    docstring: a missing payload field is the empty text). Never raises for a valid template."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "job_id":
            return job_id
        found: Any = payload
        for part in name.split(".")[1:]:
            if not isinstance(found, dict) or part not in found:
                return ""
            found = found[part]
        return found if isinstance(found, str) else json.dumps(found, separators=(",", ":"), sort_keys=True)

    return _PART.sub(value, template)
