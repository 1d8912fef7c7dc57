"""A W&B offline run, written by wandb itself (WANDB_MODE=offline, no network), read from its run-*.wandb record
log and judged end to end by ``rl-autotest compare``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from autotest.inputs.log_search import find_logs
from autotest.readers.reading import read_trace
from tests.helpers import DATA, run_cli
from tests import waits

pytest.importorskip("wandb")

SCRIPTED = DATA / "baselines" / "scripted.yaml"
TRAIN = """
import wandb
run = wandb.init(project="ci", config={"seed": 0})
run.log({"eval/accuracy": 0.5}, step=0)
for step in range(1, 11):
    row = {"response/rewards/mean": 0.1 + 0.02 * step, "mismatch/mismatch_k3_kl": 1e-14,
           "samples": wandb.Histogram([0.1, 0.2, 0.3])}
    if step == 10:
        row["eval/accuracy"] = 0.9
    run.log(row, step=step)
run.finish()
"""


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wandb-run")
    env = dict(os.environ, WANDB_MODE="offline", WANDB_DIR=str(folder), WANDB_SILENT="true",
               WANDB_DISABLE_GIT="true", WANDB_CONSOLE="off")
    waits.run([sys.executable, "-c", TRAIN], cwd=folder, env=env, check=True, limit_s=120)
    return folder


def test_the_offline_run_reads_its_history(work_dir: Path) -> None:
    (found,) = find_logs(work_dir)
    assert found.kind == "W&B offline run" and found.path.name.startswith("run-") and found.path.suffix == ".wandb"
    trace = read_trace(work_dir)
    assert trace.format == "wandb" and trace.train_steps == tuple(range(1, 11)) and trace.eval_steps == (0, 10)
    assert trace.get("response/rewards/mean") == pytest.approx({s: 0.1 + 0.02 * s for s in range(1, 11)})
    assert trace.non_numeric["samples"][0] == "a dict"  # a histogram is named as what it is


def test_compare_judges_the_offline_run(work_dir: Path, capsys: pytest.CaptureFixture) -> None:
    code = run_cli("compare", "--baseline", str(SCRIPTED), "--current", str(work_dir), "--no-history")
    printed = capsys.readouterr().out
    assert code == 0 and "PASS" in printed, printed


def test_a_cut_short_or_corrupt_run_file(work_dir: Path, tmp_path: Path) -> None:
    (found,) = find_logs(work_dir)
    data = found.path.read_bytes()
    cut = tmp_path / "run-cut.wandb"
    cut.write_bytes(data[: len(data) - 5])
    trace = read_trace(cut)
    assert trace.train_steps  # the half-written last record is dropped, and said
    assert [w for w in trace.warnings if "truncated final record dropped at byte" in w]
    long = tmp_path / "run-long.wandb"  # a record length past its block: corrupt, never "no rows"
    long.write_bytes(data[:11] + b"\xff\xff" + data[13:])
    from autotest.errors import UsageError

    with pytest.raises(UsageError, match=r"run-long.wandb: W&B run file is corrupt at byte 7 \(record 1 declares "
                                         r"65535 bytes, past the end of its 32 KiB block; 0 records before"):
        read_trace(long)
    bad = tmp_path / "run-bad.wandb"
    bad.write_bytes(data[:200] + bytes([data[200] ^ 0xFF]) + data[201:])

    with pytest.raises(UsageError, match=r"run-bad.wandb: W&B run file is corrupt at byte \d+ \(record \d+ fails"):
        read_trace(bad)
