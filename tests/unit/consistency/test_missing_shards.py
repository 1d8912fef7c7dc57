"""What a sharded dump lacks is named, never inferred around: a missing rank folder (an error under ``consistency
analyze``), a rank's tensor file its dump.json does not name, and a left-out tensor in the console's verdict line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autotest.consistency.cli import left_out_note
from autotest.consistency.layout import SideLayout
from autotest.consistency.reassemble import assemble_side, require_fit
from autotest.errors import UsageError
from tests.unit.consistency.test_reassemble import HEADS, KV_HEADS, O_PROJ, _dump


def test_a_missing_rank_is_named_and_never_inferred_as_a_smaller_group(tmp_path: Path) -> None:
    root = _dump(tmp_path / "dump", 4)
    shutil.rmtree(root / "step3" / "rank2")
    assembly = assemble_side(root, "rollout", SideLayout(heads=HEADS, kv_heads=KV_HEADS), tmp_path / "out")
    assert not assembly.reassembled  # not tp=3 over ranks 0, 1, 3
    assert assembly.missing == assembly.notes == [
        f"{root / 'step3'}: rank folder rank2 missing (present: rank0, rank1, rank3); a rank that did not dump cannot "
        "be reassembled: re-collect it, or point at a complete dump"]
    with pytest.raises(UsageError, match=r"^--rollout-dump .*step3: rank folder rank2 missing \(present: rank0, "):
        require_fit(SideLayout(), "rollout", assembly)


def test_rank_zero_missing_is_named_too(tmp_path: Path) -> None:
    root = _dump(tmp_path / "dump", 2)
    shutil.rmtree(root / "step3" / "rank0")
    (root / "step3" / "rank1").rename(root / "step3" / "rank3")
    assembly = assemble_side(root, "rollout", SideLayout(tp=1), tmp_path / "out")
    assert "rank folders rank0, rank1, rank2 missing (present: rank3)" in assembly.missing[0]


def test_a_rank_without_its_tensor_file_is_named(tmp_path: Path) -> None:
    root = _dump(tmp_path / "dump", 2)
    dump_json = root / "step3" / "rank1" / "dump.json"
    doc = json.loads(dump_json.read_text())
    del doc["data"][O_PROJ]["input_args"][0]["data_name"]  # rank 1 kept statistics only for this tensor
    dump_json.write_text(json.dumps(doc))
    assembly = assemble_side(root, "rollout", SideLayout(heads=HEADS, kv_heads=KV_HEADS), tmp_path / "out")
    [finding] = assembly.findings
    assert (finding.module, finding.ranks, finding.kind) == ("model.layers.0.self_attn.o_proj", (1,), "tensor_missing")
    assert finding.detail.startswith("input_args.0: rank 1 dumped no tensor file (its dump.json has statistics only) "
                                     "where rank(s) 0 did; joined from statistics")


def test_the_verdict_line_says_when_tensors_were_left_out() -> None:
    finding = {"side": "rollout", "kind": "not_placed", "module": "m", "ranks": [0, 1], "detail": "d"}
    assert left_out_note(None) == "" and left_out_note({"rollout": {"findings": []}}) == ""
    assert left_out_note({"rollout": {"findings": [{**finding, "kind": "replicas_disagree"}]}}) == ""
    assert left_out_note({"rollout": {"findings": [finding, {**finding, "kind": "tensor_missing"}]}}) == (
        " among the tensors compared; 2 tensor(s) of the rollout dumps were left out or compared by statistics alone "
        "(listed below and in output_5, Sharded dumps): not a clean pass")


def test_the_cli_says_it_on_the_verdict_line_and_refuses_a_missing_rank(tmp_path: Path, capsys) -> None:
    from autotest.consistency.cli import main

    train, rollout = _dump(tmp_path / "train", 1), _dump(tmp_path / "rollout", 2)
    dump_json = rollout / "step3" / "rank1" / "dump.json"
    doc = json.loads(dump_json.read_text())
    doc["data"][O_PROJ]["input_args"][0]["shape"][-1] += 1  # the ranks disagree on a shard's shape
    dump_json.write_text(json.dumps(doc))
    layout = f"heads={HEADS},kv_heads={KV_HEADS}"
    argv = ["--train-dump", str(train), "--rollout-dump", str(rollout), "--rollout-layout", layout]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out.splitlines()
    verdict = next(line for line in out if line.startswith(("verdict: ", "first divergence: ")))
    assert "1 tensor(s) of the rollout dumps were left out" in verdict, out
    assert any("ranks dumped different shapes" in line for line in out)
    shutil.rmtree(rollout / "step3" / "rank1")
    shutil.copytree(rollout / "step3" / "rank0", rollout / "step3" / "rank2")
    assert main([*argv, "--out", str(tmp_path / "out2")]) == 2
    assert "rank folder rank1 missing (present: rank0, rank2)" in capsys.readouterr().err
