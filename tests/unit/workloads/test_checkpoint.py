"""The tiny GRPO workload's checkpoint flags and file: every misuse is one line; a resume checks the config."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.workloads.checkpoint import CheckpointPlan, check_plan, load_checkpoint, save_checkpoint
from autotest.workloads.faults import catalogue, make_fault


@pytest.mark.parametrize("plan,message", [
    (CheckpointPlan(save_at=3), "--save-checkpoint-at: needs --checkpoint-dir DIR"),
    (CheckpointPlan(save_dir=Path("x")), "--checkpoint-dir: needs --save-checkpoint-at K"),
    (CheckpointPlan(save_at=46, save_dir=Path("x")), "--save-checkpoint-at: 46 is not a step of this run (1..45)"),
    (CheckpointPlan(stop_at=50), "--stop-at-step: 50 is not a step of this run (1..45)"),
    (CheckpointPlan(save_at=30, save_dir=Path("x"), stop_at=20), "--save-checkpoint-at: 30 is after --stop-at-step 20"),
])
def test_each_misused_flag_is_one_line(plan, message):
    with pytest.raises(UsageError) as err:
        check_plan(plan, 45, diagnostic=False)
    assert str(err.value) == message


def test_a_diagnostic_run_neither_saves_nor_resumes():
    with pytest.raises(UsageError, match="--diagnostic-config: cannot be combined"):
        check_plan(CheckpointPlan(resume_from=Path("x")), 45, diagnostic=True)


def test_a_resume_needs_the_file_and_the_config_that_saved_it(tmp_path):
    pytest.importorskip("torch")
    with pytest.raises(UsageError, match=r"no checkpoint.pt there \(save one with --save-checkpoint-at K"):
        load_checkpoint(tmp_path, {"seed": 0}, 45)
    save_checkpoint(tmp_path, 20, {"seed": 0, "lr": 1e-3, "fault": ""}, {"trainer": {}, "rollout": {}}, {})
    assert not list(tmp_path.glob(".*partial"))
    assert load_checkpoint(tmp_path, {"seed": 0, "lr": 1e-3, "fault": "resume-rng-reset"}, 45)["step"] == 20
    with pytest.raises(UsageError, match=r"made with lr=0.001, this run has 0.01; resume with the config"):
        load_checkpoint(tmp_path, {"seed": 0, "lr": 1e-2, "fault": ""}, 45)
    with pytest.raises(UsageError, match="at step 20, the last step; nothing left to train"):
        load_checkpoint(tmp_path, {"seed": 0, "lr": 1e-3, "fault": ""}, 20)
    (tmp_path / "checkpoint.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(UsageError, match="cannot read checkpoint.pt"):
        load_checkpoint(tmp_path, {"seed": 0}, 45)


def test_the_resume_faults_leave_out_one_part_only_where_a_run_resumes():
    parts = ("model", "optimizer", "scheduler", "rng")
    assert make_fault(None).restored_parts("trainer", parts) == parts
    assert make_fault("resume-no-optimizer").restored_parts("trainer", parts) == ("model", "scheduler", "rng")
    assert make_fault("resume-lr-restart").restored_parts("trainer", parts) == ("model", "optimizer", "rng")
    assert make_fault("resume-rng-reset").restored_parts("driver", ("rng",)) == ()
    assert make_fault("resume-rng-reset").restored_parts("rollout", ("model", "rng")) == ("model",)
    listed = {f["name"]: f["expected"] for f in catalogue()}
    assert {listed[n]["triage"] for n in ("resume-no-optimizer", "resume-lr-restart", "resume-rng-reset")} == {
        "resume"}
