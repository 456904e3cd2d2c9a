"""Tests for punctual.ids: job/run ids, shard hashing and pagination cursors."""

from __future__ import annotations

import contextlib
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from punctual import ids
from punctual.errors import InvalidCursor, InvalidId

pytestmark = pytest.mark.unit

JOB_ID = "job_" + "0123456789abcdef" * 2


# -- job ids ----------------------------------------------------------------------------------


def test_new_job_ids_are_well_formed_and_unique() -> None:
    made = {ids.new_job_id() for _ in range(1_000)}
    assert len(made) == 1_000
    for job_id in made:
        assert ids.check_job_id(job_id) == job_id


def test_idempotency_key_job_id_is_deterministic_per_owner() -> None:
    a = ids.job_id_for_idempotency_key("alice", "key-1")
    assert a == ids.job_id_for_idempotency_key("alice", "key-1")
    assert ids.check_job_id(a) == a
    assert a != ids.job_id_for_idempotency_key("bob", "key-1")  # another owner, another job
    assert a != ids.job_id_for_idempotency_key("alice", "key-2")
    # the separator keeps ("ab", "c") and ("a", "bc") apart
    assert ids.job_id_for_idempotency_key("ab", "c") != ids.job_id_for_idempotency_key("a", "bc")


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "job_",
        "job_" + "0" * 31,
        "job_" + "0" * 33,
        "job_" + "G" * 32,
        "JOB_" + "0" * 32,
        "run_" + "0" * 32,
        " job_" + "0" * 32,
        "job_" + "0" * 32 + "\n",
        None,
        42,
    ],
)
def test_check_job_id_refuses_malformed_ids(bad: object) -> None:
    with pytest.raises(InvalidId) as info:
        ids.check_job_id(bad)  # type: ignore[arg-type]
    assert info.value.field == "job_id"


# -- run ids ----------------------------------------------------------------------------------


@given(scheduled_at=st.integers(min_value=0, max_value=10**15 - 1))
def test_run_id_round_trips(scheduled_at: int) -> None:
    run_id = ids.run_id_for(JOB_ID, scheduled_at)
    assert ids.parse_run_id(run_id) == (JOB_ID, scheduled_at)


def test_run_id_shape() -> None:
    assert ids.run_id_for(JOB_ID, 1_800_000_000_000) == "run_" + JOB_ID[4:] + "_1800000000000"


def test_run_ids_differ_per_job_and_time() -> None:
    other = ids.new_job_id()
    assert ids.run_id_for(JOB_ID, 1) != ids.run_id_for(JOB_ID, 2)
    assert ids.run_id_for(JOB_ID, 1) != ids.run_id_for(other, 1)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "run_",
        "run_" + "0" * 32,  # no time
        "run_" + "0" * 32 + "_",  # empty time
        "run_" + "0" * 31 + "_1",  # short hex
        "run_" + "0" * 33 + "_1",
        "run_" + "Z" * 32 + "_1",
        "run_" + "0" * 32 + "_-1",  # negative time
        "run_" + "0" * 32 + "_1.5",
        "run_" + "0" * 32 + "_" + "9" * 16,  # more than 15 digits
        "job_" + "0" * 32,  # a job id is not a run id
        "run_" + "0" * 32 + "_1 ",
        "run_" + "0" * 32 + "_1\n",  # a trailing newline must not slip through a '$' anchor
        None,
        123,
    ],
)
def test_parse_run_id_refuses_malformed_ids(bad: object) -> None:
    with pytest.raises(InvalidId) as info:
        ids.parse_run_id(bad)  # type: ignore[arg-type]
    assert info.value.field == "run_id"


# -- shards -----------------------------------------------------------------------------------


def test_shard_of_is_pinned() -> None:
    # crc32: the same in every process and language. These values must never change: stored
    # jobs carry their due_shard and a changed hash would strand them in the wrong shard.
    assert ids.shard_of("job_00000000000000000000000000000000", 16) == 13
    assert ids.shard_of("abc", 16) == 2
    assert ids.shard_of("abc", 4096) == 450


def test_shard_of_is_stable_across_processes() -> None:
    # Python's str hash is salted per process; shard_of must not be.
    keys = [f"job_{i:032x}" for i in range(20)]
    here = [ids.shard_of(k, 64) for k in keys]
    code = f"from punctual import ids; print([ids.shard_of(k, 64) for k in {keys!r}])"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
        cwd=None,
    )
    assert out.stdout.strip() == repr(here)


@pytest.mark.parametrize("shards", [1, 2, 4, 16, 4096])
def test_shard_of_is_in_range_and_spreads(shards: int) -> None:
    counts = [0] * shards
    n = 4_000
    for _ in range(n):
        shard = ids.shard_of(ids.new_job_id(), shards)
        assert 0 <= shard < shards
        counts[shard] += 1
    if shards <= 16:
        expected = n / shards
        assert min(counts) > expected * 0.6 and max(counts) < expected * 1.4


def test_unit_fraction_is_deterministic_and_in_range() -> None:
    values = [ids.unit_fraction(f"run_{i}") for i in range(2_000)]
    assert all(0.0 <= v < 1.0 for v in values)
    assert values == [ids.unit_fraction(f"run_{i}") for i in range(2_000)]
    assert 0.4 < sum(values) / len(values) < 0.6
    assert len(set(values)) == len(values)


# -- cursors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "position",
    [{}, {"created_at": 1_800_000_000_000, "job_id": JOB_ID}, {"s": "ünïcødé ✓", "n": None, "l": [1, 2]}],
)
def test_cursor_round_trips(position: dict[str, object]) -> None:
    cursor = ids.encode_cursor("jobs", position)
    assert ids.decode_cursor("jobs", cursor) == position


def test_cursor_is_url_safe_and_opaque() -> None:
    cursor = ids.encode_cursor("runs", {"scheduled_at": 1, "job_id": JOB_ID})
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert JOB_ID not in cursor


def test_cursor_of_another_listing_is_refused() -> None:
    cursor = ids.encode_cursor("runs", {"scheduled_at": 1})
    with pytest.raises(InvalidCursor) as info:
        ids.decode_cursor("jobs", cursor)
    assert info.value.field == "cursor"


def test_every_single_character_edit_of_a_cursor_is_refused() -> None:
    cursor = ids.encode_cursor("jobs", {"created_at": 1_800_000_000_000, "job_id": JOB_ID})
    alphabet = "Aa0-_"
    for i, ch in enumerate(cursor):
        for replacement in alphabet:
            if replacement == ch:
                continue
            tampered = cursor[:i] + replacement + cursor[i + 1 :]
            if _b64(tampered) == _b64(cursor):
                continue  # only the unused padding bits of the last character changed: same bytes
            with pytest.raises(InvalidCursor):
                ids.decode_cursor("jobs", tampered)


def _b64(text: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@pytest.mark.parametrize(
    "bad",
    ["", "x", "!!!!", "not a cursor", "====", "A" * 3, "%00", "\x00\x01", "é"],
)
def test_garbage_cursor_is_refused(bad: str) -> None:
    with pytest.raises(InvalidCursor):
        ids.decode_cursor("jobs", bad)


def test_truncated_cursor_is_refused() -> None:
    cursor = ids.encode_cursor("jobs", {"created_at": 1, "job_id": JOB_ID})
    for cut in range(len(cursor)):
        with pytest.raises(InvalidCursor):
            ids.decode_cursor("jobs", cursor[:cut])


def test_cursor_whose_position_is_not_an_object_is_refused() -> None:
    import base64
    import hashlib
    import json

    for payload in ({"k": "jobs", "p": [1, 2]}, {"k": "jobs"}, [1], "x", {"k": "jobs", "p": None}):
        raw = json.dumps(payload).encode()
        check = hashlib.blake2b(raw, digest_size=4).digest()
        cursor = base64.urlsafe_b64encode(check + raw).decode().rstrip("=")
        with pytest.raises(InvalidCursor):
            ids.decode_cursor("jobs", cursor)


@given(st.text(max_size=64))
def test_decode_cursor_never_raises_anything_but_invalid_cursor(text: str) -> None:
    with contextlib.suppress(InvalidCursor):
        ids.decode_cursor("jobs", text)
