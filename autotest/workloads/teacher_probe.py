"""The teacher probe of tiny MOPD: fixed prompts through each teacher server, against its own checkpoint.

The launcher scores a few fixed sequences per teacher (prompts of the teacher's domain, each with a correct
answer) directly from the teacher checkpoint on disk, with the server's own scoring code
(``teacher_server.Teacher``), and writes them to a probe file (:func:`write_references`). The training process
sends the same sequences through each teacher's endpoints, as it addresses that teacher (by name), before the
first step and after the last one (:func:`run_probe`), and logs the largest |log-prob difference| per teacher as
``distillation/teacher_probe/<teacher>``: at step 1 for the start, at the last step for the end. A healthy server
answers with the checkpoint's log-probs (the same forward on the same batch: a difference of 0); a server that
scores with other weights, another temperature or misaligned tokens, or a name exported with another teacher's
URL, answers otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autotest.errors import UsageError
from autotest.workloads.tasks import get_task
from autotest.workloads.teacher_client import request_logprobs

#: the probe's metric per teacher (``distillation/*`` is the teacher group in the xtuner preset)
PROBE_METRIC = "distillation/teacher_probe/{teacher}"
#: a difference above this is a teacher answering otherwise than its checkpoint; a healthy server's is exactly 0
#: (the same fp32 forward of the same batch), a temperature of 1.1 or a misaligned token gives 0.1 and more
PROBE_TOLERANCE = 1e-3
#: fixed probe sequences per teacher (the first training targets of its domain)
PROBE_PROMPTS = 4


def probe_sequences(domain: str, count: int = PROBE_PROMPTS) -> list[list[int]]:
    """``count`` fixed sequences of ``domain``: a prompt, a correct answer, ``<eos>``."""
    from autotest.workloads.teachers import correct_pairs
    from autotest.workloads.tiny_lm import DigitTokenizer

    task = get_task(domain)
    eos = DigitTokenizer().eos_id
    return [list(task.prompt(t).token_ids) + list(correct_pairs(task, t)[0]) + [eos]
            for t in task.train_targets[:count]]


def write_references(teachers: Mapping[str, tuple[str, Path]], path: Path) -> dict[str, Any]:
    """Score each teacher's probe sequences from its checkpoint (``name -> (domain, checkpoint dir)``) into ``path``."""
    from autotest.workloads.teacher_server import Teacher

    refs: dict[str, Any] = {}
    for name, (domain, checkpoint) in teachers.items():
        sequences = probe_sequences(domain)
        refs[name] = {"checkpoint": str(checkpoint), "token_ids": sequences,
                      "logprobs": Teacher(checkpoint, name).logprobs(sequences)}
    data = {"tolerance": PROBE_TOLERANCE, "teachers": refs}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) + "\n", encoding="utf-8")
    return data


def load_references(path: Path) -> dict[str, Any]:
    """The probe file written by :func:`write_references`; a ``UsageError`` line when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        teachers = data["teachers"]
        if not isinstance(teachers, dict) or not all(
                isinstance(t.get("token_ids"), list) and isinstance(t.get("logprobs"), list) for t in teachers.values()):
            raise KeyError("teachers")
        return data
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"--teacher-probe {path}: not a probe file ({type(exc).__name__}: {exc}); it is written by "
                         "python -m autotest.workloads.mopd_launch") from None


def run_probe(references: Mapping[str, Any], endpoints: Mapping[str, Sequence[str]],
              timeout_s: float = 60.0) -> dict[str, float]:
    """Largest |served - checkpoint| log-prob per teacher over its probe sequences and all its replicas."""
    out: dict[str, float] = {}
    for name, ref in references["teachers"].items():
        worst = 0.0
        for url in endpoints.get(name, ()):
            served = request_logprobs(url, ref["token_ids"], timeout_s=timeout_s)  # no step: never a training request
            for row, expected in zip(served, ref["logprobs"], strict=True):
                worst = max([worst, *(abs(a - b) for a, b in zip(row, expected, strict=True))])
        out[name] = worst
    return out


def probe_metrics(diffs: Mapping[str, float]) -> dict[str, float]:
    """The tracker keys of one probe."""
    return {PROBE_METRIC.format(teacher=name): value for name, value in sorted(diffs.items())}


def probe_line(when: str, diffs: Mapping[str, float], tolerance: float = PROBE_TOLERANCE) -> str:
    """The run-log line of one probe."""
    bad = sorted(name for name, value in diffs.items() if value > tolerance)
    verdict = f"ANSWERS DIFFER from the checkpoint: {', '.join(bad)}" if bad else "every teacher answers as its checkpoint"
    shown = ", ".join(f"{name} {value:.3g}" for name, value in sorted(diffs.items()))
    return f"teacher probe at {when}: max |logprob diff| {shown} (tolerance {tolerance:g}): {verdict}"
