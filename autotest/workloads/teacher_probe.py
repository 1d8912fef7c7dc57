"""The teacher probe of tiny MOPD: fixed prompts through each teacher server, against answers recorded with the fixture.

Each teacher's answers on a few fixed sequences (prompts of its domain, each with a correct answer) were scored
when the fixture was made, by a plain-torch forward of its weights that shares no code with the server
(``probe_answers``), and are kept beside the fixture (``probe_answers.json``, with the sha256 of the weights they
were scored from). The launcher copies them into a probe file (:func:`write_references`) after checking them
against the fixture's weights. The training process sends the same sequences through each teacher's endpoints,
as it addresses that teacher (by name), before the first step and after the last one (:func:`run_probe`), and
logs the largest |log-prob difference| per teacher as ``distillation/teacher_probe/<teacher>``: at step 1 for the
start, at the last step for the end. A healthy server answers within float rounding of the recorded answers
(~1e-6); a server that loaded other weights, scores with another temperature or misaligned tokens, or a name
exported with another teacher's URL, answers otherwise. A reference scored by the serving code itself could not
catch the first: it would be scored from the same wrong weights.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotest.errors import UsageError
from autotest.workloads.teacher_client import request_logprobs

if TYPE_CHECKING:
    from autotest.workloads.teachers import Fixture

#: the probe's metric per teacher (``distillation/*`` is the teacher group in the xtuner preset)
PROBE_METRIC = "distillation/teacher_probe/{teacher}"
#: a difference above this is a teacher answering otherwise than its weights; a healthy server's is float rounding
#: (~1e-6: another fp32 forward of the same weights), a temperature of 1.1 or a misaligned token gives 0.1 and more,
#: the other teacher's weights several nats
PROBE_TOLERANCE = 1e-3



def write_references(fixture: Fixture, path: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The fixture's recorded probe answers (``probe_answers``), checked against its weights, into ``path``.

    A fixture made before answers were recorded beside it gets them scored now, by the same plain-torch forward
    (never through a server); answers recorded from other weights are a ``UsageError``."""
    from autotest.workloads.probe_answers import ANSWERS_FILE, check_weights, record_answers, recorded_answers
    from autotest.workloads.teachers import teacher_name

    weights = fixture.weights()
    check_weights(fixture.info().get("weights_sha256", {}), weights, fixture.root)  # as made, student included
    if not (fixture.root / ANSWERS_FILE).exists():
        log(f"teacher probe: no {ANSWERS_FILE} beside the fixture {fixture.root}; scoring it from the weights")
        record_answers(fixture.root, fixture.domains)
    answers = recorded_answers(fixture.root, weights, fixture.domains)
    refs = {teacher_name(d): {"checkpoint": str(fixture.teacher(d)), "recorded": str(fixture.root / ANSWERS_FILE),
                              "token_ids": answers[teacher_name(d)]["token_ids"],
                              "logprobs": answers[teacher_name(d)]["logprobs"]} for d in fixture.domains}
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
    """Largest |served - recorded| log-prob per teacher over its probe sequences and all its replicas."""
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
    # the reference is the checkpoint's answers recorded when the fixture was made (probe_answers), not a re-scoring
    verdict = (f"ANSWERS DIFFER from the checkpoint: {', '.join(bad)} (answers recorded with the fixture)" if bad
               else "every teacher answers as its checkpoint (answers recorded with the fixture)")
    shown = ", ".join(f"{name} {value:.3g}" for name, value in sorted(diffs.items()))
    return f"teacher probe at {when}: max |logprob diff| {shown} (tolerance {tolerance:g}): {verdict}"
