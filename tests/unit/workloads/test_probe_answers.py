"""The teacher probe's recorded answers: an independent forward, kept beside the fixture, refused when stale."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from autotest.errors import UsageError  # noqa: E402
from autotest.workloads.probe_answers import (  # noqa: E402
    ANSWERS_FILE,
    probe_sequences,
    qwen3_logprobs,
    recorded_answers,
)
from autotest.workloads.teacher_probe import write_references  # noqa: E402
from autotest.workloads.teachers import COMMITTED_DIR, load_checkpoint, open_fixture, teacher_name  # noqa: E402


def _max_diff(a: list[list[float]], b: list[list[float]]) -> float:
    return max(abs(x - y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True))


def test_the_plain_forward_agrees_with_transformers_and_tells_the_teachers_apart() -> None:
    """Two implementations of the same weights agree to float rounding; other weights differ by nats."""
    seqs = probe_sequences("digit_sum")
    sum_ckpt, product_ckpt = COMMITTED_DIR / teacher_name("digit_sum"), COMMITTED_DIR / teacher_name("digit_product")
    ours = qwen3_logprobs(sum_ckpt, seqs)
    ids = torch.tensor(seqs)  # the probe sequences of one domain have one length
    with torch.no_grad():
        logp = load_checkpoint(sum_ckpt)(input_ids=ids).logits[:, :-1].float().log_softmax(-1)
    theirs = logp.gather(-1, ids[:, 1:, None]).squeeze(-1).tolist()
    assert _max_diff(ours, theirs) < 1e-4
    assert _max_diff(ours, qwen3_logprobs(product_ckpt, seqs)) > 1.0


def test_the_committed_answers_belong_to_the_committed_weights() -> None:
    fixture = open_fixture(COMMITTED_DIR)
    answers = recorded_answers(fixture.root, fixture.weights(), fixture.domains)
    for domain in fixture.domains:
        fresh = qwen3_logprobs(fixture.teacher(domain), probe_sequences(domain))
        assert _max_diff(answers[teacher_name(domain)]["logprobs"], fresh) < 1e-5


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "fixture"
    shutil.copytree(COMMITTED_DIR, root)
    return root


def test_answers_recorded_from_other_weights_are_one_error_line(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    data = json.loads((root / ANSWERS_FILE).read_text(encoding="utf-8"))
    data["teachers"][teacher_name("digit_sum")]["weights_sha256"] = "0" * 64
    (root / ANSWERS_FILE).write_text(json.dumps(data), encoding="utf-8")
    fixture = open_fixture(root)
    with pytest.raises(UsageError) as info:
        write_references(fixture, tmp_path / "probe.json", log=lambda line: None)
    message = str(info.value)
    assert "\n" not in message and "digit_sum_teacher: recorded from other weights" in message
    assert message.endswith("regenerate with python -m autotest.workloads.probe_answers FIXTURE_DIR")


@pytest.mark.parametrize("text", ["not json", '{"teachers": {}}'])
def test_unreadable_answers_are_one_error_line(tmp_path: Path, text: str) -> None:
    root = _copy(tmp_path)
    (root / ANSWERS_FILE).write_text(text, encoding="utf-8")
    fixture = open_fixture(root)
    with pytest.raises(UsageError, match="no recorded teacher probe answers .*regenerate with"):
        recorded_answers(root, fixture.weights(), fixture.domains)


def test_a_fixture_without_answers_gets_them_scored_from_its_weights(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    (root / ANSWERS_FILE).unlink()
    lines: list[str] = []
    data = write_references(open_fixture(root), tmp_path / "probe.json", log=lines.append)
    assert (root / ANSWERS_FILE).is_file() and len(lines) == 1 and "scoring it from the weights" in lines[0]
    committed = json.loads((COMMITTED_DIR / ANSWERS_FILE).read_text(encoding="utf-8"))["teachers"]
    for name, ref in data["teachers"].items():
        assert _max_diff(ref["logprobs"], committed[name]["logprobs"]) < 1e-5


def test_weights_that_are_not_the_ones_the_fixture_recorded_are_one_error_line(tmp_path: Path) -> None:
    """fixture.json's sha256 were recorded when the fixture was made; the launcher compares them with the disk."""
    root = _copy(tmp_path)
    student = root / "student" / "model.safetensors"
    student.write_bytes(student.read_bytes()[:-4] + b"\0\0\0\0")
    with pytest.raises(UsageError) as info:
        write_references(open_fixture(root), tmp_path / "probe.json", log=lambda line: None)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{root}: student/model.safetensors (sha256 ")
    assert "is not the checkpoint fixture.json recorded" in message
