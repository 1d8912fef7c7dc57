"""Checkpoint and resume of the tiny GRPO workload, for real: saving changes no number, a resumed run continues
bitwise (eval points included), and each resume fault breaks exactly the state it names."""

from __future__ import annotations

import contextlib
import dataclasses
import io
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from autotest.workloads.checkpoint import CheckpointPlan  # noqa: E402
from autotest.workloads.grpo import GRPOConfig, run  # noqa: E402

from .test_grpo import REWARDS, _launch, _no_time, _rows, _summaries  # noqa: E402

# eval at 3 and 6: the resumed steps 3-6 include both eval points
CONFIG = GRPOConfig(steps=6, eval_every=3, prompts_per_step=8, samples_per_prompt=4)
LR = "train_metrics/worker_0/lr"
LOSS = "train_metrics/worker_0/loss"


def _run(work: Path, config: GRPOConfig = CONFIG, **plan: Any) -> list[dict[str, Any]]:
    with contextlib.redirect_stdout(io.StringIO()):
        return _no_time(_rows(run(config, work, plan=CheckpointPlan(**plan))))


def _from(rows: list[dict[str, Any]], first: int, last: int = 99) -> list[dict[str, Any]]:
    return [r for r in rows if first <= r["step"] <= last]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], Path]:
    """An uninterrupted 6-step run that saved a checkpoint after step 2, and that checkpoint's folder."""
    root = tmp_path_factory.mktemp("saved")
    rows = _run(root / "work", save_at=2, save_dir=root / "ckpt")
    return rows, root / "ckpt"


def test_saving_a_checkpoint_changes_no_number_of_the_run(tmp_path, saved):
    rows, folder = saved
    assert (folder / "checkpoint.pt").is_file()
    assert _run(tmp_path / "plain") == rows


def test_a_resumed_run_continues_bitwise_at_the_next_step(tmp_path, saved):
    rows, folder = saved
    resumed = _run(tmp_path / "resumed", resume_from=folder)
    assert [r["step"] for r in resumed][0] == 3  # no step-0 eval, no restart: the step counter continued
    assert resumed == _from(rows, 3)  # mini-batch rows, summaries and the eval points at 3 and 6
    assert "eval/accuracy" in _summaries(resumed)[3] and "eval/accuracy" in _summaries(resumed)[6]
    stopped = _run(tmp_path / "stopped", resume_from=folder, stop_at=4)
    assert stopped == _from(rows, 3, 4)  # stopping early keeps the LR schedule of the whole run


def _resumed_with(tmp_path: Path, folder: Path, fault: str) -> list[dict[str, Any]]:
    return _run(tmp_path / fault, dataclasses.replace(CONFIG, fault=fault), resume_from=folder, stop_at=4)


def _sampled(rows: list[dict[str, Any]], step: int) -> dict[str, Any]:
    """What step ``step`` sampled and scored before its update (its summary without the eval after it)."""
    return {k: v for k, v in _summaries(rows)[step].items() if not k.startswith("eval/")}


def _minibatch(rows: list[dict[str, Any]], step: int, key: str) -> list[float]:
    return [r[key] for r in rows if r["step"] == step and key in r]


def test_each_resume_fault_breaks_the_state_it_names(tmp_path, saved):
    rows, folder = saved
    healthy = _summaries(rows)
    # optimizer state not restored: step 3 samples the same, its updates differ after the first mini-batch
    no_adam = _resumed_with(tmp_path, folder, "resume-no-optimizer")
    assert _sampled(no_adam, 3) == _sampled(rows, 3)
    assert _minibatch(no_adam, 3, LOSS)[0] == _minibatch(rows, 3, LOSS)[0]
    assert _minibatch(no_adam, 3, LOSS)[1:] != _minibatch(rows, 3, LOSS)[1:]
    # LR schedule restarted: step 3 trains at the step-1 learning rate
    restarted = _resumed_with(tmp_path, folder, "resume-lr-restart")
    assert set(_minibatch(restarted, 3, LR)) == {CONFIG.lr} != set(_minibatch(rows, 3, LR))
    assert _sampled(restarted, 3) == _sampled(rows, 3)
    # RNG not restored: step 3 already samples other prompts and responses
    reseeded = _resumed_with(tmp_path, folder, "resume-rng-reset")
    assert _summaries(reseeded)[3][REWARDS] != healthy[3][REWARDS] or (
        _summaries(reseeded)[3]["response/response_len/mean"] != healthy[3]["response/response_len/mean"])
    assert _minibatch(reseeded, 3, LR) == _minibatch(rows, 3, LR)


def test_resume_misuse_is_one_line_and_exit_2(tmp_path, saved):
    _, folder = saved
    missing = _launch(tmp_path / "w", "--resume-from", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "--resume-from" in missing.stderr and "no checkpoint.pt there" in missing.stderr
    other = _launch(tmp_path / "w", "--resume-from", str(folder), "--steps", "6", "--seed", "1")
    assert other.returncode == 2 and "the checkpoint was made with" in other.stderr, other.stderr
