"""Regressions (issue 10, items 2 and 3): numbers that corrupted or answered 500, and bodies that
were not JSON objects, on both engines.

- ``{"payload": {"big": 1e400}}`` was a 201: the embedded engine stored ``null``, the aws engine
  ``inf`` (GET showed ``null``, the HTTP target was sent ``Infinity``, which is not JSON).
- A payload holding a 5,000-digit integer was a 500 (Python refuses to parse it).
- ``POST /jobs`` with a JSON list holding a valid job was a 201.
"""

from __future__ import annotations

import json
import math

import pytest
from pydantic import ValidationError

from punctual.engines.aws import job_items
from punctual.model import Job, JobSpec
from punctual.numbers import MAX_INT, MIN_INT, first_out_of_range, parse_float, parse_int
from tests.regressions.conftest import OWNER, TARGET, Api

pytestmark = pytest.mark.integration


def job_body(payload_json: str) -> str:
    return f'{{"name": "n", "schedule": "* * * * *", "target": {json.dumps(TARGET)}, "payload": {payload_json}}}'


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ('{"big": 1e400}', "payload.big"),
        ('{"a": [1, -1e400]}', "payload.a.1"),
        ('{"n": ' + "9" * 5000 + "}", "payload.n"),
        (str(MAX_INT + 1), "payload"),
        (str(MIN_INT - 1), "payload"),
    ],
)
def test_an_out_of_range_number_is_a_400_naming_where_and_nothing_is_stored(api: Api, payload: str, field: str) -> None:
    answer = api.call("POST", "/jobs", raw=job_body(payload))
    assert (answer.status, answer.body["code"], answer.fields) == (400, "number_out_of_range", [field]), answer.body
    assert api.engine.store.list_jobs(OWNER).items == []


def test_numbers_at_the_edges_of_the_range_round_trip_exactly_on_both_engines(api: Api) -> None:
    payload = {"min": MIN_INT, "max": MAX_INT, "tiny": 5e-324, "huge": 1.7976931348623157e308, "t": True}
    created = api.call("POST", "/jobs", raw=job_body(json.dumps(payload)))
    assert created.status == 201, created.body
    got = api.call("GET", f"/jobs/{created.body['id']}")
    assert got.body["payload"] == payload
    assert api.engine.store.get_job(created.body["id"]).payload == payload


def test_an_out_of_range_number_in_another_field_is_a_4xx_not_a_500(api: Api) -> None:
    for raw in ('{"name": "n", "timeout_s": 1e400}', '{"name": "n", "max_retries": ' + "1" * 5000 + "}"):
        answer = api.call("POST", "/jobs", raw=raw)
        assert answer.status == 400, answer.body


@pytest.mark.parametrize("raw", ["[BODY]", '"text"', "42", "null", "true"])
def test_a_body_that_is_not_a_json_object_is_refused_with_the_error_shape(api: Api, raw: str) -> None:
    body = json.dumps({"name": "n", "schedule": "* * * * *", "target": TARGET})
    answer = api.call("POST", "/jobs", raw=raw.replace("BODY", body))
    assert answer.status == 422, answer.body
    assert (answer.body["code"], answer.fields) == ("invalid_input", ["body"])
    assert api.engine.store.list_jobs(OWNER).items == []


def test_a_patch_body_that_is_not_a_json_object_is_refused(api: Api) -> None:
    created = api.call("POST", "/jobs", {"name": "n", "schedule": "* * * * *", "target": TARGET})
    answer = api.call("PATCH", f"/jobs/{created.body['id']}", raw='[{"name": "renamed"}]')
    assert answer.status == 422, answer.body
    assert api.engine.store.get_job(created.body["id"]).name == "n"


# -- the model and the serializers, below the API ----------------------------------------------------


@pytest.mark.unit
def test_the_model_refuses_non_finite_and_out_of_range_numbers_saying_where() -> None:
    for payload, where in (({"x": [0, math.inf]}, "payload.x.1"), ({"n": math.nan}, "payload.n"), (2**64, "payload")):
        with pytest.raises(ValidationError, match=where.replace(".", r"\.")):
            JobSpec(name="n", schedule="* * * * *", target=TARGET, payload=payload)  # type: ignore[arg-type]


@pytest.mark.unit
def test_no_serializer_writes_infinity_or_nan() -> None:
    """A model built without validation still cannot be written: pydantic would write null, the
    aws item JSON ``Infinity``."""
    job = Job.model_construct(**{**_valid_job().__dict__, "payload": {"big": math.inf}})
    with pytest.raises(ValueError, match=r"payload\.big"):
        job.model_dump_json()
    with pytest.raises(ValueError):
        job_items.job_to_items(job, retention_days=1)


@pytest.mark.unit
def test_the_parser_hooks_mark_what_they_cannot_keep() -> None:
    value = json.loads('{"a": [1e400, 123456789012345678901, 1.5, -9223372036854775808]}', parse_int=parse_int,
                       parse_float=parse_float)  # fmt: skip
    assert first_out_of_range(value) == ("a.0", "1e400")
    assert first_out_of_range({"a": [1.5, 10**20]}) == ("a.1", "an integer of 67 bits")
    assert first_out_of_range({"ok": [MIN_INT, MAX_INT, 0.1, True, None, "1e400"]}) is None


def _valid_job() -> Job:
    return Job(
        name="n", schedule="* * * * *", target=TARGET, id="job_" + "0" * 32, owner=OWNER,  # type: ignore[arg-type]
        next_run_at=1, created_at=1, updated_at=1,
    )  # fmt: skip
