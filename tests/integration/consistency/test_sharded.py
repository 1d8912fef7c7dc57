"""Real sharded dumps, analysed end to end: the embedded tiny Qwen3 served tensor-parallel over 2 and 4 gloo
processes (MSProbe dumping each rank) against the single-process trainer, and the trainer split into 2 pipeline
stages. Every shard fault must be named at its module and rank; a clean sharded pair must report no divergence.

The dumps are made once per session (tests/shared_build.py): 10 dump sets, about 60 s on 2 cores; the analyses
take 2-5 s each (docs/benchmarks.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autotest.consistency.analyze import analyze_dumps
from autotest.consistency.dumps import find_dump_dirs, load_tensor, read_dump
from autotest.consistency.layout import SideLayout
from autotest.workloads import engine_tp, sharded_dump
from tests.shared_build import content_key, shared_build
from tests import waits

pytestmark = pytest.mark.slow

#: name -> (side, tp, pp, fault)
DUMPS = {
    "train": ("train", 1, 1, ""),
    "train-pp2": ("train", 1, 2, ""),
    "train-pp2-residual": ("train", 1, 2, "pp-residual"),
    "rollout-tp1": ("rollout", 1, 1, ""),
    "rollout-tp2": ("rollout", 2, 1, ""),
    "rollout-tp4": ("rollout", 4, 1, ""),
    "rollout-tp2-stale-shard": ("rollout", 2, 1, "stale-shard"),
    "rollout-tp4-stale-shard": ("rollout", 4, 1, "stale-shard"),
    "rollout-tp2-fused-split": ("rollout", 2, 1, "fused-split"),
    "rollout-tp4-no-allreduce": ("rollout", 4, 1, "no-allreduce"),
}


def _build(base: Path) -> None:
    for name, (side, tp, pp, fault) in DUMPS.items():
        sharded_dump.dump_side(side, base / name, tp=tp, pp=pp, fault=fault)


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    key = content_key(sorted(DUMPS.items()), files=(Path(engine_tp.__file__), Path(sharded_dump.__file__)))
    return shared_build(tmp_path_factory, "sharded-dumps", key, _build)


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return waits.run([sys.executable, "-m", "autotest.cli", "consistency", "analyze", *argv], check=False,
                     capture_output=True, text=True, limit_s=300)


def _analyse(dumps: Path, train: str, rollout: str, out: Path, layouts: dict[str, SideLayout] | None = None):
    return analyze_dumps(dumps / train / "dump", dumps / rollout / "dump", out,
                         train_correlation=dumps / train / "correlation.jsonl",
                         rollout_correlation=dumps / rollout / "correlation.jsonl", strict=True, layouts=layouts)


@pytest.mark.parametrize("rollout", ["rollout-tp2", "rollout-tp4"])
def test_a_clean_tensor_parallel_rollout_reports_no_divergence(dumps: Path, tmp_path: Path, rollout: str) -> None:
    report = _analyse(dumps, "train", rollout, tmp_path)
    assert report.verdict == "no_divergence", report.root_cause
    tp = rollout[-1]
    assert report.sharding["rollout"]["groups"] == [f"tp={tp}, pp=1 over ranks "
                                                    f"{', '.join(map(str, range(int(tp))))} (inferred)"]
    assert report.sharding["rollout"]["findings"] == []


@pytest.mark.parametrize("rollout", ["rollout-tp2", "rollout-tp4"])
def test_the_reassembled_ranks_are_the_unsharded_engine_dump(dumps: Path, tmp_path: Path, rollout: str) -> None:
    _analyse(dumps, "train", rollout, tmp_path)
    got = read_dump(find_dump_dirs(tmp_path / "reassembled" / "rollout")[0])
    want = read_dump(find_dump_dirs(dumps / "rollout-tp1" / "dump")[0])
    assert set(got.entries) == set(want.entries)
    compared = 0
    for key, entry in want.entries.items():
        mine = {t.path: t for t in got.entries[key].tensors}
        for tensor in entry.tensors:
            assert mine[tensor.path].shape == tensor.shape, (key, tensor.path)
            diff = (load_tensor(mine[tensor.path]) - load_tensor(tensor)).abs().max()
            assert float(diff) < 1e-5, (key, tensor.path, float(diff))
            compared += 1
    assert compared > 150


@pytest.mark.parametrize(("rollout", "rank"), [("rollout-tp2-stale-shard", 1), ("rollout-tp4-stale-shard", 3)])
def test_a_stale_shard_is_named_at_its_module_and_rank(dumps: Path, tmp_path: Path, rollout: str, rank: int) -> None:
    report = _analyse(dumps, "train", rollout, tmp_path)
    cause = report.root_cause
    assert (cause["module"], cause["bucket"]) == ("model.layers.1.mlp.down_proj", "parameter_sync_mismatch")
    assert cause["ranks"] == [rank]
    [blamed] = report.sharding["blame"]
    assert blamed["tensor"] == "parameters.weight" and blamed["relative_error"][str(rank)] > 0.1
    assert all(err < 1e-5 for r, err in blamed["relative_error"].items() if r != str(rank))


def test_a_wrong_split_of_the_fused_qkv_is_named_at_qkv_proj_on_both_ranks(dumps: Path, tmp_path: Path) -> None:
    report = _analyse(dumps, "train", "rollout-tp2-fused-split", tmp_path)
    cause = report.root_cause
    assert cause["rollout_modules"] == ["model.layers.0.self_attn.qkv_proj"]
    assert cause["bucket"] == "parameter_sync_mismatch" and cause["ranks"] == [0, 1]


def test_a_missing_all_reduce_is_named_at_o_proj_on_every_rank(dumps: Path, tmp_path: Path) -> None:
    report = _analyse(dumps, "train", "rollout-tp4-no-allreduce", tmp_path)
    cause = report.root_cause
    assert cause["module"] == "model.layers.0.self_attn.o_proj" and cause["ranks"] == [0, 1, 2, 3]
    first = report.sharding["rollout"]["findings"][0]
    assert (first["module"], first["kind"]) == ("model.layers.0.self_attn.o_proj", "replicas_disagree")
    assert "all-reduce did not run" in first["detail"]


def test_a_clean_pipeline_split_trainer_against_a_tensor_parallel_rollout(dumps: Path, tmp_path: Path) -> None:
    report = _analyse(dumps, "train-pp2", "rollout-tp2", tmp_path)
    assert report.verdict == "no_divergence", report.root_cause
    assert report.sharding["train"]["groups"] == ["tp=1, pp=2 over ranks 0, 1 (inferred)"]


def test_a_stage_hand_off_that_drops_the_residual_is_named_at_the_next_stage(dumps: Path, tmp_path: Path) -> None:
    report = _analyse(dumps, "train-pp2-residual", "rollout-tp2", tmp_path, {"train": SideLayout(pp=2)})
    cause = report.root_cause
    assert cause["module"].startswith("model.layers.1") and cause["ranks"] == [1]
    [finding] = report.sharding["train"]["findings"]
    assert (finding["module"], finding["kind"], finding["ranks"]) == ("model.layers.1", "stage_boundary", [1])
    assert report.sharding["train"]["layout"] == "pp=2"


def test_the_cli_prints_the_rank_and_writes_the_sharding_section(dumps: Path, tmp_path: Path) -> None:
    d = dumps / "rollout-tp2-stale-shard"
    out = tmp_path / "out"
    out.mkdir()
    done = _cli("--train-dump", str(dumps / "train" / "dump"),
                   "--rollout-dump", str(d / "dump"), "--train-correlation", str(dumps / "train" / "correlation.jsonl"),
                   "--rollout-correlation", str(d / "correlation.jsonl"), "--rollout-layout", "tp=2", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "  rank(s): 1: rollout model.layers.1.mlp.down_proj parameters.weight" in done.stdout
    assert "rollout dumps reassembled: tp=2, pp=1 over ranks 0, 1 (declared)" in done.stdout
    doc = json.loads((out / "output_5_root_cause_report.json").read_text())
    assert doc["root_cause"]["ranks"] == [1] and doc["sharding"]["rollout"]["layout"] == "tp=2"
    assert "## Sharded dumps" in (out / "output_5_root_cause_report.md").read_text()


def test_a_layout_that_does_not_fit_the_rank_folders_is_one_line(dumps: Path, tmp_path: Path) -> None:
    d = dumps / "rollout-tp2"
    done = _cli("--train-dump", str(dumps / "train" / "dump"),
                   "--rollout-dump", str(d / "dump"), "--rollout-layout", "tp=4", "--out", str(tmp_path))
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert "--rollout-layout tp=4: " in line and "does not fit 2 rank folders" in line


def test_tensor_parallel_peers_that_logged_other_requests_are_named(dumps: Path, tmp_path: Path) -> None:
    lines = [json.loads(line) for line in (dumps / "rollout-tp2" / "correlation.jsonl").read_text().splitlines()]
    for line in lines:
        if line["rank"] == 1:
            line["requests"][0]["request_id"] += "-elsewhere"
    log = tmp_path / "rollout.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = analyze_dumps(dumps / "train" / "dump", dumps / "rollout-tp2" / "dump", tmp_path,
                           train_correlation=dumps / "train" / "correlation.jsonl", rollout_correlation=log,
                           strict=True)
    found = [f for f in report.sharding["rollout"]["findings"] if f["kind"] == "requests_differ"]
    assert [f["ranks"] for f in found] == [[0, 1]]  # one per step: the requests each rank logged there
    assert "rank 1 logged requests ['r0-elsewhere', 'r1-elsewhere']" in found[0]["detail"]
    assert report.verdict == "no_divergence"  # rank 0's records pair the reassembled dump as before
