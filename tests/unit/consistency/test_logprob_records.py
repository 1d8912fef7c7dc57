"""The log-prob record reader: each bad input is one UsageError line naming file, line and key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotest.consistency.logprob_records import append_records, read_logprob_files, record_lines
from autotest.errors import UsageError

GOOD = {"kind": "recorded", "step": 3, "sample": 0, "request_id": "step3-p0-s0",
        "positions": [4, 5], "token_ids": [9, 1], "logprobs": [-0.5, -1.25]}


def _write(tmp_path: Path, *rows: object) -> Path:
    path = tmp_path / "recorded.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def _error(tmp_path: Path, *rows: object) -> str:
    with pytest.raises(UsageError) as info:
        read_logprob_files([_write(tmp_path, *rows)])
    message = str(info.value)
    assert "\n" not in message
    return message


def test_writer_and_reader_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "logprobs" / "trainer.jsonl"
    append_records(path, record_lines("trainer", 3, [0, 1], ["a", "b"], [[4, 5], [4]], [[9, 1], [2]],
                                      [[-0.5, -1.25], [-0.1]], "bf16"))
    (records,) = read_logprob_files([path.parent]).values()
    assert [(r.kind, r.sample, r.request_id, r.positions, r.token_ids, r.logprobs, r.dtype) for r in records] == [
        ("trainer", 0, "a", (4, 5), (9, 1), (-0.5, -1.25), "low"), ("trainer", 1, "b", (4,), (2,), (-0.1,), "low")]
    assert records[1].source == f"{path}:2"


@pytest.mark.parametrize("key", ["kind", "step", "sample", "positions", "token_ids", "logprobs"])
def test_a_missing_key_is_named_with_its_line(tmp_path: Path, key: str) -> None:
    row = {k: v for k, v in GOOD.items() if k != key}
    assert _error(tmp_path, GOOD, row).endswith(f"recorded.jsonl:2: key '{key}' is missing; write one JSON object "
                                                "per line as documented in autotest/consistency/logprob_records.py")


def test_lists_of_different_lengths_are_a_shape_error(tmp_path: Path) -> None:
    message = _error(tmp_path, {**GOOD, "logprobs": [-0.5]})
    assert ":1: positions, token_ids and logprobs have 2, 2 and 1 entries" in message


def test_a_scalar_where_a_list_belongs_is_a_shape_error(tmp_path: Path) -> None:
    assert ":1: key 'token_ids' is int, not a list" in _error(tmp_path, {**GOOD, "token_ids": 9})


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_log_probs_are_refused(tmp_path: Path, literal: str) -> None:
    line = json.dumps(GOOD).replace("-1.25", literal)
    message = _error(tmp_path, line)
    assert ":1: key 'logprobs[1]' is" in message and "log-probs must be finite" in message


def test_a_positive_value_is_not_a_log_prob(tmp_path: Path) -> None:
    assert "not a log-probability" in _error(tmp_path, {**GOOD, "logprobs": [0.5, -1.0]})


@pytest.mark.parametrize(("row", "expected"), [
    ("{not json", ":1: not valid JSON"),
    ("[1, 2]", ":1: a JSON list, not an object"),
    ({**GOOD, "kind": "sampled"}, ":1: key 'kind' is 'sampled'; use one of recorded, recomputed, trainer"),
    ({**GOOD, "step": -1}, ":1: key 'step' is -1, not a whole number >= 0"),
    ({**GOOD, "positions": [4, 4]}, ":1: key 'positions' repeats a position"),
    ({**GOOD, "token_ids": [9, "1"]}, ":1: key 'token_ids[1]' is '1', not a whole number"),
    ({**GOOD, "dtype": "fp8"}, ":1: key 'dtype' is 'fp8'; use one of fp32, bf16, fp16"),
    ({**GOOD, "dtype": ["fp32"]}, ":1: key 'dtype' is ['fp32']; use one of fp32, bf16, fp16"),  # found by tests/fuzz
])
def test_malformed_lines(tmp_path: Path, row: object, expected: str) -> None:
    assert expected in _error(tmp_path, row)


def test_a_sample_written_twice_is_refused(tmp_path: Path) -> None:
    assert "sample step3-p0-s0 of step 3 is already at" in _error(tmp_path, GOOD, GOOD)
    bare = {k: v for k, v in GOOD.items() if k != "request_id"}
    assert "sample 0 of step 3 is already at" in _error(tmp_path, bare, bare)


def test_ranks_may_reuse_sample_numbers_when_request_ids_differ(tmp_path: Path) -> None:
    (records,) = read_logprob_files([_write(tmp_path, GOOD, {**GOOD, "request_id": "step3-p1-s0"})]).values()
    assert len(records) == 2


def test_a_missing_path_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="log-prob records not found"):
        read_logprob_files([tmp_path / "absent.jsonl"])


def test_the_kv_cache_path_round_trips_and_goes_by_pairs(tmp_path: Path) -> None:
    path = tmp_path / "recorded.jsonl"
    append_records(path, record_lines("recorded", 3, [0], ["a"], [[4, 5]], [[9, 1]], [[-0.5, -1.25]], "fp32",
                                      position_ids=[[3, 5]], cache_lengths=[[4, 5]]))
    (record,) = read_logprob_files([path])["recorded"]
    assert (record.position_ids, record.cache_lengths) == ((3, 5), (4, 5))
    assert read_logprob_files([_write(tmp_path, GOOD)])["recorded"][0].position_ids is None  # optional
    for row in ({**GOOD, "position_ids": [3, 4]}, {**GOOD, "position_ids": [3], "cache_lengths": [4]}):
        assert _error(tmp_path, row).endswith(":1: keys 'position_ids' and 'cache_lengths' go together, one entry "
                                              "per position (or leave both out)")
    assert "key 'cache_lengths[1]' is -1" in _error(tmp_path, {**GOOD, "position_ids": [3, 4],
                                                                "cache_lengths": [4, -1]})
