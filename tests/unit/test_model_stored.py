"""The STORED validation context: a job read back from storage skips the checks that only refuse
input, and reads back exactly the job that was written; input without it is still refused. The
StoredReader (the engines' parse of stored jobs) leaves those validators out and gives the same job."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from punctual.model import Job, JobSpec
from punctual.model.stored import STORED, StoredReader, validators_left_out, without_validators

pytestmark = pytest.mark.unit

NOW = 1_800_000_000_000


def job(**spec: Any) -> Job:
    fields: dict[str, Any] = {"name": "n", "target": {"type": "http", "url": "https://example.com/hook"}}
    fields.update(spec)
    validated = JobSpec.model_validate(fields).model_dump()
    identity = {"id": "job_" + "a" * 32, "owner": "alice", "created_at": NOW, "updated_at": NOW}
    return Job.model_validate({**validated, **identity})


@pytest.mark.parametrize(
    "spec",
    [
        {"schedule": "*/5 * * * *", "timezone": "Europe/Paris"},
        {"run_at": "2027-01-01T09:00:00+01:00", "payload": {"a": [1, 2.5, {"b": None}], "c": "é"}},
        {"depends_on": {"jobs": ["job_" + "0" * 32, "job_" + "1" * 32]}},
        {
            "schedule": "0 9 * * 1-5",
            "retry": {"backoff_s": 5, "max_backoff_s": 60},
            "target": {
                "type": "http",
                "url": "http://[::1]:8080/x?y=1",
                "headers": {"X-A": "1"},
                "secret_headers": {"Authorization": "sealed"},
            },
        },
    ],
)
def test_a_stored_job_reads_back_as_written(spec: dict[str, Any]) -> None:
    written = job(**spec)
    doc = written.model_dump_json()
    assert Job.model_validate_json(doc, context=STORED) == written
    assert Job.model_validate(written.model_dump(mode="json"), context=STORED) == written
    assert Job.model_validate_json(doc) == written  # the full checks agree
    read = StoredReader(Job).json(doc)
    assert type(read) is Job and read == written
    assert read.model_fields_set == Job.model_validate_json(doc, context=STORED).model_fields_set
    assert StoredReader(Job).python(written.model_dump(mode="json")) == written
    # and a batch of them, as one JSON array, reads back as the same jobs (the embedded engine's get_jobs)
    assert StoredReader(Job).json_list(f"[{doc},{doc}]") == [written, written]


class _Info:
    """What a validator reads of pydantic's ValidationInfo: the context."""

    context = STORED


def test_every_validator_the_reader_leaves_out_changes_nothing_under_stored() -> None:
    # Given every before/after validator of the Job schema (the refusing checks of JobSpec, its
    # target, retry policy and dependencies), called as pydantic calls them under STORED
    left_out = validators_left_out(Job.__pydantic_core_schema__)
    assert len(left_out) >= 8
    value = object()
    for validator in left_out:
        # Then each returns the very value it was given: leaving it out changes no stored job
        assert validator(value, _Info()) is value, validator
    # and the reader's schema has none left
    assert validators_left_out(without_validators(Job.__pydantic_core_schema__)) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [("schedule", "61 * * * *"), ("timezone", "Mars/Base"), ("target", {"type": "http", "url": "http://"})],
)
def test_input_without_the_context_is_still_refused(field: str, value: Any) -> None:
    doc = job(schedule="* * * * *").model_dump(mode="json")
    doc[field] = value
    with pytest.raises(ValidationError):
        Job.model_validate(doc)


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_retries", "many"), ("timeout_s", 0), ("overlap", "sometimes"), ("name", ""), ("target", {"type": "ftp"})],
)
def test_types_and_bounds_are_checked_on_stored_documents_too(field: str, value: Any) -> None:
    doc = job(schedule="* * * * *").model_dump(mode="json")
    doc[field] = value
    with pytest.raises(ValidationError):
        Job.model_validate(doc, context=STORED)
    with pytest.raises(ValidationError, match=field):
        StoredReader(Job).python(doc)
    with pytest.raises(ValidationError, match=field):
        StoredReader(Job).json(json.dumps(doc))
    with pytest.raises(ValidationError, match=field):
        StoredReader(Job).json_list(json.dumps([doc]))
