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
    del doc["weight_version"]
    path.write_text(json.dumps(doc) + "\n")
    with pytest.raises(UsageError, match=r"c.jsonl:1: key 'weight_version' is missing"):
        read_correlation_log(path, "actor")
