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


def _trace(exp_dir: Path):
    from autotest.readers.reading import read_trace

    return read_trace(exp_dir / "logs" / "exp_tracking" / "tracker.jsonl", "auto")


def _judged(tmp_path: Path, folder: Path, fault: str) -> tuple[dict[int, dict[str, Any]], str]:
    """(the resumed run's step summaries, what the resume phase says did not continue) for a run resumed with
    ``fault`` after step 2 and stopped after step 4, held against the uninterrupted run of ``saved``."""
    from autotest.inputs.resume_phase import Resume
    from autotest.inputs.roles import resolve_roles
    from autotest.judge.model import FAIL
    from autotest.judge.resume import resume_results

    with contextlib.redirect_stdout(io.StringIO()):
        exp = run(dataclasses.replace(CONFIG, fault=fault), tmp_path / fault,
                  plan=CheckpointPlan(resume_from=folder, stop_at=4))
    main = _trace(sorted((folder.parent / "work").iterdir())[-1])
    resumed = _trace(exp)

    class Ended:
        exit_code, timed_out, timeout_s, stopped_reason, interrupted, signal = 0, False, 60.0, None, None, None

    resume = Resume(at_step=2, steps=2, checkpoint_args=("x",), resume_args=("x",))
    results = resume_results(resume, main, resumed, Ended(), roles=resolve_roles(main.metrics))
    failed = [r for r in results if r.status == FAIL]
    assert failed, fault
    return _summaries(_no_time(_rows(exp))), failed[0].parameters["not_continued"]


DIGEST, K3 = "data/prompt_digest", "mismatch/mismatch_k3_kl"


def test_the_prompt_digest_tells_prompt_order_from_sampling_rng_from_weights(tmp_path, saved):
    """Issue 44: the three causes a resume that sampled differently used to be named together, each told apart on
    real runs by the first resumed step's prompt digest and mismatch."""
    rows, folder = saved
    healthy = _summaries(rows)
    level = max(r[K3] for r in healthy.values())  # other samples of the same weights stay at this level
    order, said = _judged(tmp_path, folder, "resume-prompt-order")
    assert order[3][DIGEST] != healthy[3][DIGEST] and order[3][K3] < 10 * level
    assert said.startswith("the prompt order (the data sampler's state): step 3, the first resumed step, drew other "
                           f"prompts than the uninterrupted run ({DIGEST} differs there)"), said
    sampling, said = _judged(tmp_path, folder, "resume-sampling-rng")
    assert sampling[3][DIGEST] == healthy[3][DIGEST] and sampling[3][K3] < 10 * level
    assert sampling[3]["response/response_len/mean"] != healthy[3]["response/response_len/mean"]
    assert said.startswith(f"the sampling RNG: step 3, the first resumed step, the same prompts as the uninterrupted "
                           f"run ({DIGEST} bitwise equal there) and sampled differently"), said
    weights, said = _judged(tmp_path, folder, "resume-rollout-weights")
    assert weights[3][DIGEST] == healthy[3][DIGEST] and weights[3][K3] > 1e6 * level
    assert said.startswith(f"the rollout engine's weights: step 3, the first resumed step, the same prompts as the "
                           f"uninterrupted run ({DIGEST} bitwise equal there) and sampled differently"), said
    # every RNG re-seeded: the prompts differ first, and the line says the sampling RNG cannot be told then
    _, said = _judged(tmp_path, folder, "resume-rng-reset")
    assert said.startswith("the prompt order") and "cannot be told while the prompts differ" in said
    # claim false: a resume that restored everything leaves nothing to name
    from autotest.workloads.resume_faults import ResumeNoOptimizer

    no_adam, said = _judged(tmp_path, folder, ResumeNoOptimizer.name)
    assert no_adam[3][DIGEST] == healthy[3][DIGEST] and said.startswith("the optimizer state"), said
