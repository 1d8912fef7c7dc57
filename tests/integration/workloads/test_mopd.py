"""The MOPD training side: the k1 distillation formulas, teacher log-prob alignment over HTTP, the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from autotest.workloads.metrics import masked_mean  # noqa: E402
from autotest.workloads.mopd import (  # noqa: E402
    ACCEPTED_FAULTS,
    MOPDConfig,
    _sample_prompts,
    _teacher_logprobs,
    model_config_of,
)
from autotest.workloads.mopd_trainer import DistillOptim, DistillTrainer  # noqa: E402
from autotest.workloads.probe_answers import qwen3_logprobs  # noqa: E402
from autotest.workloads.rollout import RolloutEngine  # noqa: E402
from autotest.workloads.tasks import get_task  # noqa: E402
from autotest.workloads.teacher_client import ENDPOINTS_ENV, Routing, TeacherClient  # noqa: E402
from autotest.workloads.teachers import (  # noqa: E402
    Fixture,
    TeacherRecipe,
    load_checkpoint,
    teacher_name,
)
from autotest.workloads.tiny_lm import response_logprobs  # noqa: E402

from .test_teacher_server import Served  # noqa: E402
from tests import waits  # noqa: E402

#: its fixture trains the tiny-mopd teachers and runs a distillation (~120 s of setup on 2 cores);
#: out of the quick tier, `pytest -m "not slow"`
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]


def student_batch(fixture: Fixture, seed: int = 0, prompts: int = 64):
    """A real rollout batch of the student over both domains, and its engine's model config."""
    config = MOPDConfig(student=str(fixture.student), prompts_per_step=prompts)
    engine = RolloutEngine(model_config_of(fixture.student), "fp32", seed, max_new_tokens=8)
    student = load_checkpoint(fixture.student)
    engine.load_weights({n: p.detach() for n, p in student.named_parameters()}, 0)
    tasks = {d: get_task(d) for d in config.domains}
    return engine.generate(_sample_prompts(tasks, config, torch.Generator().manual_seed(seed)), 1, 1)


def local_teacher_logprobs(fixture: Fixture, batch) -> torch.Tensor:
    """Each row scored in-process by its domain's teacher (the reference for the HTTP path), by code the teacher
    server does not run: the plain-torch forward of the weights file (``probe_answers.qwen3_logprobs``), one
    unpadded sequence at a time, never ``load_checkpoint`` and the model class the server scores with."""
    prompt_len = batch.prompt_ids.shape[1]
    out = torch.zeros_like(batch.rollout_logprobs)
    for row, prompt in enumerate(batch.prompts):
        length = int(batch.response_mask[row].sum())
        seq = batch.prompt_ids[row].tolist() + batch.response_ids[row, :length].tolist()
        (scored,) = qwen3_logprobs(fixture.teacher(prompt.data_source), [seq])
        out[row, :length] = torch.tensor(scored[prompt_len - 1:])
    return out * batch.response_mask


def test_model_config_of_the_checkpoint_is_the_recipes(mopd_fixture: Fixture) -> None:
    assert model_config_of(mopd_fixture.student) == TeacherRecipe().model


def test_distill_step_logs_the_k1_reverse_kl_and_moves_toward_the_teacher(mopd_fixture: Fixture) -> None:
    batch = student_batch(mopd_fixture)
    teacher_logp = local_teacher_logprobs(mopd_fixture, batch)
    teachers = [teacher_name(p.data_source) for p in batch.prompts]
    trainer = DistillTrainer(mopd_fixture.student, DistillOptim(lr=3e-3), seed=0)
    mask = batch.response_mask
    ids = torch.cat([batch.prompt_ids, batch.response_ids], dim=1)
    with torch.no_grad():
        student_logp, _ = response_logprobs(trainer.model, ids, batch.prompt_ids.shape[1])
    d = (student_logp - teacher_logp) * mask
    first = trainer.distill_step(batch, teacher_logp, teachers)
    m = first.metrics
    assert m["distillation/reduced_distillation_kl"] == pytest.approx(float(masked_mean(d, mask)), rel=1e-5)
    assert m["distillation/reduced_distillation_abs_loss"] == pytest.approx(float(masked_mean(d.abs(), mask)), rel=1e-5)
    assert m["distillation/opd_reverse_kl"] == m["distillation/reduced_distillation_kl"]
    assert m["distillation/opd_abs_logprob_loss"] == m["distillation/reduced_distillation_abs_loss"]
    for domain in mopd_fixture.domains:
        rows = torch.tensor([p.data_source == domain for p in batch.prompts])
        assert m[f"distillation/teacher_kl/{teacher_name(domain)}"] == pytest.approx(
            float(masked_mean(d[rows], mask[rows])), rel=1e-5)
    # the rollout copy holds the same weights: train and inference agree to fp32 noise
    assert m["mismatch/mismatch_k3_kl"] < 1e-8
    assert len(first.mini_batch_rows) == 4 and all(r["skipped"] == 0.0 for r in first.mini_batch_rows)
    # policy-gradient k1 steps on the same samples lower the sampled-token KL to the teacher
    for _ in range(5):
        last = trainer.distill_step(batch, teacher_logp, teachers)
    assert last.metrics["distillation/reduced_distillation_kl"] < 0.8 * m["distillation/reduced_distillation_kl"]


def test_the_log_prob_difference_is_clamped_as_the_recipe(mopd_fixture: Fixture) -> None:
    batch = student_batch(mopd_fixture, prompts=8)
    trainer = DistillTrainer(mopd_fixture.student, DistillOptim(), seed=0)
    far = torch.full_like(batch.rollout_logprobs, -1000.0) * batch.response_mask  # a teacher that rules all out
    m = trainer.distill_step(batch, far, [teacher_name(p.data_source) for p in batch.prompts]).metrics
    assert m["distillation/reduced_distillation_kl"] == pytest.approx(20.0)


def test_teacher_logprobs_over_http_line_up_with_the_response_tokens(
        teacher_servers: dict[str, Served], mopd_fixture: Fixture) -> None:
    batch = student_batch(mopd_fixture, seed=1)
    client = TeacherClient({name: (s.url,) for name, s in teacher_servers.items()},
                           Routing({d: teacher_name(d) for d in mopd_fixture.domains}))
    try:
        remote = _teacher_logprobs(client, batch, step=1)
    finally:
        client.close()
    assert remote.shape == batch.response_ids.shape
    assert bool((remote[batch.response_mask == 0] == 0).all())  # padding stays 0
    assert torch.allclose(remote * batch.response_mask, local_teacher_logprobs(mopd_fixture, batch), atol=1e-5)


def _run_cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != ENDPOINTS_ENV}
    return waits.run([sys.executable, "-m", "autotest.workloads.mopd", "--work-dir", str(tmp_path), *args],
                     cwd=REPO, capture_output=True, text=True, limit_s=120, env={**environ, **(env or {})})


def test_cli_usage_errors_are_one_line(tmp_path: Path, mopd_fixture: Fixture) -> None:
    student = str(mopd_fixture.student)
    done = _run_cli(tmp_path, "--student", student)
    assert (done.returncode, done.stderr) == (2, f"error: {ENDPOINTS_ENV} is not set; start the teachers with "
                                                 "python -m autotest.workloads.mopd_launch, which exports it\n")
    endpoints = {ENDPOINTS_ENV: '{"digit_sum_teacher": ["http://127.0.0.1:1"]}'}
    done = _run_cli(tmp_path, "--student", student, "--fault", "teacher-swap", env=endpoints)
    assert done.returncode == 2 and done.stderr.startswith(
        "error: --fault teacher-swap: not a training fault of tiny MOPD; choose one of ")
    named = done.stderr.partition("choose one of ")[2].partition(" (teacher faults")[0].split(", ")
    assert named == list(ACCEPTED_FAULTS) and {"judge-bug", "lr-scale", "misroute"} <= set(named)
    assert "teacher-swap" not in named and "(teacher faults are injected by mopd_launch)" in done.stderr
    done = _run_cli(tmp_path, "--student", str(tmp_path), env=endpoints)
    assert done.returncode == 2 and "no config.json there" in done.stderr
    done = _run_cli(tmp_path, "--student", student, env=endpoints)
    assert (done.returncode, done.stderr.strip()) == (2, f"error: {ENDPOINTS_ENV}: no endpoint for teacher(s) "
                                                         "digit_product_teacher (have digit_sum_teacher); start them "
                                                         "or fix the teacher map")
    assert not list(tmp_path.glob("[0-9]*")), "a usage error must not start a run"
