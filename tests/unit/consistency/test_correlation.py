from __future__ import annotations

import json

import pytest

from autotest.consistency.correlation import (
    ForwardRecord,
    append_record,
    read_correlation_log,
    token_ranges_of,
)
from autotest.errors import UsageError


def record(side: str, **kw) -> ForwardRecord:
    tokens = kw.pop("token_ids", ((1, 2, 3), (4, 5)))
    base = dict(
        side=side,
        pid=7,
        rank=None,
        step=3,
        phase="prefill",
        forward_index=0,
        weight_version=3,
        msprobe_step=3,
        task="statistics",
        dump_path="/d/forward_0000/step3/proc7",
        dump_subdir="forward_0000/step3/proc7",
        request_ids=("a", "b"),
        token_ids=tokens,
        token_ranges=token_ranges_of(tokens),
        log_path="",
        line=0,
    )
    base.update(kw)
    return ForwardRecord(**base)


@pytest.mark.parametrize("side", ["rollout", "actor"])
def test_round_trip(tmp_path, side):
    path = tmp_path / "c.jsonl"
    append_record(path, record(side))
    append_record(path, record(side, forward_index=1))
    back = read_correlation_log(path, side)
    assert [r.forward_index for r in back] == [0, 1]
    assert back[1].request_ids == ("a", "b") and back[1].token_ids == ((1, 2, 3), (4, 5))
    assert back[1].token_ranges == ((0, 3), (3, 5)) and back[1].line == 2 and back[1].log_path == str(path)


def test_the_autocast_state_is_optional_and_round_trips(tmp_path):
    path = tmp_path / "c.jsonl"
    append_record(path, record("actor", autocast="torch.bfloat16"))
    append_record(path, record("actor", forward_index=1))
    assert [r.autocast for r in read_correlation_log(path, "actor")] == ["torch.bfloat16", None]
    assert "autocast" not in path.read_text().splitlines()[1]


def test_the_held_weight_version_is_optional_and_round_trips(tmp_path):
    path = tmp_path / "rollout.jsonl"
    append_record(path, record("rollout", held_weight_version=2))
    append_record(path, record("rollout"))
    held, unlogged = read_correlation_log(path, "rollout")
    assert (held.weight_version, held.held_weight_version) == (3, 2)
    assert unlogged.held_weight_version is None and "held_weight_version" not in unlogged.to_json()


def test_truncated_last_line_of_a_killed_run_is_skipped(tmp_path):
    path = tmp_path / "c.jsonl"
    append_record(path, record("actor"))
    with path.open("a") as fh:
        fh.write('{"source": "update_actor", "pid": 7, "st')
    assert len(read_correlation_log(path, "actor")) == 1


def test_malformed_lines_name_file_line_and_key(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text("not json\n" + json.dumps(record("actor").to_json()) + "\n")
    with pytest.raises(UsageError, match=r"c.jsonl:1: not valid JSON"):
        read_correlation_log(path, "actor")
    path.write_text(json.dumps(record("actor").to_json()) + "\n")
    with pytest.raises(UsageError, match=r"c.jsonl:1: key 'source': expected 'dispatch_logger' on the rollout side"):
        read_correlation_log(path, "rollout")
    doc = record("actor").to_json()
    del doc["step"]
    path.write_text(json.dumps(doc) + "\n")
    with pytest.raises(UsageError, match=r"c.jsonl:1: key 'step' is missing"):
        read_correlation_log(path, "actor")


def test_seed_format_lines_from_other_frameworks_parse_with_defaults(tmp_path):
    """Only the seed's keys: forward_index counts per process and step, the rest is unknown."""
    rollout, actor = tmp_path / "r.jsonl", tmp_path / "a.jsonl"
    rollout.write_text("".join(json.dumps({"source": "dispatch_logger", "pid": 7, "rank": 0, "step": 3,
                                            "phase": "prefill", "requests": [{"request_id": f"r{i}", "type": "prefill",
                                                                              "tokens": [1, 2, i]}]}) + "\n"
                               for i in range(2)))
    actor.write_text(json.dumps({"source": "update_actor", "pid": 9, "rank": 1, "step": 3,
                                 "request_ids": ["r0", "r1"]}) + "\n")
    r = read_correlation_log(rollout, "rollout")
    a = read_correlation_log(actor, "actor")[0]
    assert [x.forward_index for x in r] == [0, 1] and r[1].token_ids == ((1, 2, 1),)
    assert r[0].weight_version is None and r[0].dump_subdir == "" and r[0].msprobe_step == 3
    assert a.token_ids == () and a.phase == "recompute_logprob" and a.rank == 1


def _actor_line(**kw) -> str:
    row = {"source": "update_actor", "pid": 7, "rank": None, "step": 3, "request_ids": ["a"], "token_ids": [[1, 2]],
           "dump_subdir": "forward_0000/step3/proc7"}
    row.update(kw)
    return json.dumps(row) + "\n"


@pytest.mark.parametrize(("fields", "message"), [
    ({"step": "3"}, "key 'step' is \"3\", not a whole number >= 0"),
    ({"pid": None}, "key 'pid' is null, not a whole number >= 0"),
    ({"rank": [0]}, "key 'rank' is [0], not a whole number >= 0"),
    ({"weight_version": -1}, "key 'weight_version' is -1, not a whole number >= 0"),
    ({"held_weight_version": "2"}, "key 'held_weight_version' is \"2\", not a whole number >= 0"),
    ({"token_ids": [None]}, "key 'token_ids.0' must be a list of token ids"),
    ({"token_ids": [[1, 2.5]]}, "key 'token_ids.0.1' is 2.5, not a whole number >= 0"),
    ({"token_ranges": [[0]]}, "key 'token_ranges.0' must be [start, end]"),
    ({"token_ranges": 5}, "key 'token_ranges' must be a list"),
])
def test_a_value_of_the_wrong_type_is_one_line_naming_file_line_and_key(tmp_path, fields, message):
    path = tmp_path / "actor.jsonl"
    path.write_text(_actor_line() + _actor_line(**fields) + _actor_line())
    with pytest.raises(UsageError) as err:
        read_correlation_log(path, "actor")
    assert str(err.value) == f"{path}:2: {message}"


def test_a_log_that_is_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(b'{"source": "dispatch_logger"}\n\x80\x81\n')
    with pytest.raises(UsageError, match=r"rollout.jsonl: not UTF-8 text \(byte 30\); pass the JSON-lines"):
        read_correlation_log(path, "rollout")
