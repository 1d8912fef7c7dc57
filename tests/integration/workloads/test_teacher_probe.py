"""The teacher probe: fixed prompts through real teacher servers, against the answers recorded with the fixture."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from autotest.errors import UsageError  # noqa: E402
from autotest.workloads.teacher_client import request_logprobs  # noqa: E402
from autotest.workloads.probe_answers import PROBE_PROMPTS, probe_sequences  # noqa: E402
from autotest.workloads.teacher_probe import (  # noqa: E402
    PROBE_TOLERANCE,
    load_references,
    probe_line,
    probe_metrics,
    run_probe,
    write_references,
)
from autotest.workloads.teachers import Fixture, teacher_name  # noqa: E402
from autotest.workloads.tiny_lm import DigitTokenizer  # noqa: E402

from .test_teacher_server import start_server, stop  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def references(mopd_fixture: Fixture, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("probe") / "probe.json"
    write_references(mopd_fixture, path, log=lambda line: None)
    return path


def test_sequences_are_fixed_prompts_with_a_correct_answer() -> None:
    first, again = probe_sequences("digit_sum"), probe_sequences("digit_sum")
    assert first == again and len(first) == PROBE_PROMPTS
    assert first != probe_sequences("digit_product")
    assert all(seq[-1] == DigitTokenizer().eos_id for seq in first)


def test_healthy_servers_answer_as_the_recorded_answers(references: Path, mopd_fixture: Fixture,
                                                       tmp_path: Path) -> None:
    probe = load_references(references)
    served = {name: start_server(mopd_fixture.teacher(domain), tmp_path, name)
              for domain in mopd_fixture.domains for name in [teacher_name(domain)]}
    try:
        endpoints = {name: [s.url] for name, s in served.items()}
        diffs = run_probe(probe, endpoints)
        # another fp32 forward of the same weights: float rounding, far below the tolerance
        assert set(diffs) == set(served) and all(value < PROBE_TOLERANCE / 100 for value in diffs.values())
        assert set(probe_metrics(diffs)) == {f"distillation/teacher_probe/{name}" for name in served}
        assert "every teacher answers as its checkpoint" in probe_line("start", diffs)
        # a name exported with the other teacher's URL (teacher-swap) answers otherwise
        names = sorted(served)
        swapped = run_probe(probe, {names[0]: endpoints[names[1]], names[1]: endpoints[names[0]]})
        assert all(value > 0.1 for value in swapped.values())
        line = probe_line("end", swapped)
        assert "ANSWERS DIFFER from the checkpoint" in line and all(name in line for name in names)
    finally:
        for s in served.values():
            stop(s)


def test_misscore_from_step_answers_off_by_one_from_then_on(references: Path, mopd_fixture: Fixture,
                                                            tmp_path: Path) -> None:
    """The teacher-misscore fault: answers as the checkpoint before step K, otherwise from K on, probes included."""
    probe = load_references(references)
    name = teacher_name("digit_sum")
    served = start_server(mopd_fixture.teacher("digit_sum"), tmp_path, name, "--misscore-from-step", "3")
    try:
        endpoints = {name: [served.url]}
        assert run_probe(probe, endpoints)[name] < PROBE_TOLERANCE
        seqs = probe["teachers"][name]["token_ids"]
        request_logprobs(served.url, seqs, step=2)
        assert run_probe(probe, endpoints)[name] < PROBE_TOLERANCE
        request_logprobs(served.url, seqs, step=3)
        assert run_probe(probe, endpoints)[name] > 0.1 > PROBE_TOLERANCE
    finally:
        stop(served)


def perturbed_copy(checkpoint: Path, folder: Path, scale: float) -> Path:
    """``checkpoint`` with every weight multiplied by ``scale``: a server that loaded weights almost but not quite
    the fixture's (a half-finished copy, another step's save)."""
    from safetensors.torch import load_file, save_file

    out = folder / checkpoint.name
    shutil.copytree(checkpoint, out)
    weights = load_file(str(checkpoint / "model.safetensors"))
    save_file({key: value * scale for key, value in weights.items()}, str(out / "model.safetensors"),
              metadata={"format": "pt"})
    return out


def test_a_server_with_the_wrong_weights_is_caught(references: Path, mopd_fixture: Fixture, tmp_path: Path) -> None:
    """The reference is not scored by the server's code from the server's checkpoint: a teacher server started on
    the other teacher's checkpoint, or on perturbed weights, answers otherwise than the recorded answers."""
    probe = load_references(references)
    name = teacher_name("digit_sum")
    wrong = {"other teacher": mopd_fixture.teacher("digit_product"),
             "perturbed": perturbed_copy(mopd_fixture.teacher("digit_sum"), tmp_path, 1.05)}
    for what, checkpoint in wrong.items():
        served = start_server(checkpoint, tmp_path / what.replace(" ", "-"), name)
        try:
            diffs = run_probe(probe, {name: [served.url]})
        finally:
            stop(served)
        assert diffs[name] > PROBE_TOLERANCE, what
        line = probe_line("start", diffs)
        assert "\n" not in line and f"ANSWERS DIFFER from the checkpoint: {name}" in line, (what, line)


@pytest.mark.parametrize("text, what", [
    ("not json", "JSONDecodeError"),
    ('{"tolerance": 0.001}', "KeyError"),
    ('{"teachers": {"t": {"token_ids": [[1, 2]]}}}', "KeyError"),
    ('{"teachers": []}', "KeyError"),
])
def test_a_file_that_is_not_a_probe_file_is_one_error_line(tmp_path: Path, text: str, what: str) -> None:
    path = tmp_path / "probe.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError) as info:
        load_references(path)
    message = str(info.value)
    assert message.startswith(f"--teacher-probe {path}: not a probe file ({what}") and "\n" not in message
    assert message.endswith("it is written by python -m autotest.workloads.mopd_launch")


def test_a_missing_probe_file_is_one_error_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a probe file .FileNotFoundError"):
        load_references(tmp_path / "absent.json")


def test_references_record_the_checkpoint_and_tolerance(references: Path, mopd_fixture: Fixture) -> None:
    data = json.loads(references.read_text(encoding="utf-8"))
    assert data["tolerance"] == PROBE_TOLERANCE
    for domain in mopd_fixture.domains:
        ref = data["teachers"][teacher_name(domain)]
        assert ref["checkpoint"] == str(mopd_fixture.teacher(domain))
        assert ref["recorded"] == str(mopd_fixture.root / "probe_answers.json")
        assert [len(row) for row in ref["logprobs"]] == [len(seq) - 1 for seq in ref["token_ids"]]
