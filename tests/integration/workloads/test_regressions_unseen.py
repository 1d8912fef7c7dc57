"""The unseen regressions of issue 44 item 7 (autotest.workloads.regressions_unseen), each in a real 6-step tiny-grpo
run: it completes, and it changes what its docstring says and nothing else, against a clean run of the same seed."""

from __future__ import annotations

import contextlib
import dataclasses
import io
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from autotest.workloads.checkpoint import CheckpointPlan  # noqa: E402
from autotest.workloads.faults import make_fault  # noqa: E402
from autotest.workloads.grpo import GRPOConfig, run  # noqa: E402

from .test_grpo import K3, REWARDS, _no_time, _rows, _summaries  # noqa: E402

pytestmark = pytest.mark.slow  # seven 6-step runs and a resumed one: about 40 s on 2 quiet cores

CONFIG = GRPOConfig(steps=6, eval_every=3, prompts_per_step=8, samples_per_prompt=4)
ENTROPY = "entropy/mean"


def _run(work: Path, fault: str = "", **plan: Any) -> list[dict[str, Any]]:
    config = make_fault(fault, CONFIG.seed).configure(dataclasses.replace(CONFIG, fault=fault))
    with contextlib.redirect_stdout(io.StringIO()):
        return _no_time(_rows(run(config, work, plan=CheckpointPlan(**plan))))


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return _run(tmp_path_factory.mktemp("clean") / "w")


def _steps(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    summaries = _summaries(rows)
    assert sorted(summaries) == list(range(1, CONFIG.steps + 1))  # the run completed
    return summaries


def test_seq_mean_loss_trains_otherwise_from_the_first_update(tmp_path, clean):
    got, want = _steps(_run(tmp_path, "seq-mean-loss")), _steps(clean)
    assert got[1] == want[1]  # the first rollout comes before any update
    assert any(got[s][ENTROPY] != want[s][ENTROPY] for s in range(2, 7))


def test_entropy_from_next_step_shifts_the_entropy_alone(tmp_path, clean):
    rows = _run(tmp_path, "entropy-from-next-step")
    got, want = _steps(rows), _steps(clean)
    assert [{k: v for k, v in r.items() if k != ENTROPY} for r in rows] == \
        [{k: v for k, v in r.items() if k != ENTROPY} for r in clean]  # training and every other metric: bitwise
    assert [got[s][ENTROPY] for s in range(1, 6)] == [want[s][ENTROPY] for s in range(2, 7)]
    assert got[6][ENTROPY] == want[6][ENTROPY]  # the last row is flushed with its own


def test_prompts_drawn_twice_changes_the_training_data(tmp_path, clean):
    got, want = _steps(_run(tmp_path, "prompts-drawn-twice")), _steps(clean)
    assert any(got[s][REWARDS] != want[s][REWARDS] for s in range(1, 7))
    assert all(got[s][K3] < 1e-9 for s in got)  # the rollout and the trainer still agree


def test_sync_half_buffer_leaves_the_even_steps_stale(tmp_path, clean):
    got = _steps(_run(tmp_path, "sync-half-buffer"))
    assert all(got[s][K3] < 1e-9 for s in (1, 3, 5))  # after a full sync
    assert all(got[s][K3] > 1e-6 for s in (2, 4, 6)), {s: got[s][K3] for s in got}  # after a half one


def test_sync_swap_before_copy_is_stale_from_step_2(tmp_path, clean):
    got, want = _steps(_run(tmp_path, "sync-swap-before-copy")), _steps(clean)
    assert got[1] == want[1]
    assert all(got[s][K3] > 1e-6 for s in range(2, 7)), {s: got[s][K3] for s in got}


def test_resume_prompt_order_leaves_the_saving_run_clean_and_the_resumed_one_other_prompts(tmp_path, clean):
    saved = _run(tmp_path / "saved", "resume-loader-state-lost", save_at=2, save_dir=tmp_path / "ckpt")
    assert saved == clean
    resumed = _steps_from(_run(tmp_path / "resumed", "resume-loader-state-lost", resume_from=tmp_path / "ckpt"), 3)
    plain = _steps_from(_run(tmp_path / "plain", resume_from=tmp_path / "ckpt"), 3)
    assert plain == {s: r for s, r in _summaries(clean).items() if s >= 3}  # without it the resume is bitwise
    assert resumed[3][REWARDS] != plain[3][REWARDS] or resumed[3]["response/response_len/mean"] != \
        plain[3]["response/response_len/mean"]


def _steps_from(rows: list[dict[str, Any]], first: int) -> dict[int, dict[str, Any]]:
    summaries = _summaries(rows)
    assert sorted(summaries) == list(range(first, CONFIG.steps + 1))
    return summaries
