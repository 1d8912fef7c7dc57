"""ab.md's next line: the paired differences' own next step where they name one, else the status's line."""

from __future__ import annotations

from pathlib import Path

from autotest.ab.ab_report import render_ab_report
from autotest.ab.interleave import AbOutcome, outcome_document
from autotest.ab.sides import Side
from autotest.inputs.baseline import load_baseline
from autotest.judge.model import Measured, TriageFinding
from autotest.judge.paired import PairedVerdict
from tests.helpers import write_yaml

BASELINE = """\
name: t
golden: {table: {reward: {1: 0.5, 2: 0.5}}}
checks:
  - {metric: reward, method: absolute, operator: "<", threshold: 0.1}
"""


def _outcome(next_step: str, tmp_path: Path) -> AbOutcome:
    verdict = PairedVerdict("FAIL", (), (1, 2), next_step=next_step)
    return AbOutcome("t", Side("base", "main"), Side("head", "pr"), verdict, (), tmp_path)


def test_the_next_line_is_the_paired_differences_own_when_they_name_one(tmp_path: Path) -> None:
    baseline = load_baseline(write_yaml(tmp_path / "t.yaml", BASELINE))
    logging = "logging, not training: length moved while the 2 other paired metrics are bitwise equal"
    report = render_ab_report(_outcome(logging, tmp_path), baseline, [])
    assert f"- next: {logging}" in report and "the head changed training" not in report
    assert outcome_document(_outcome(logging, tmp_path))["next"] == logging
    plain = render_ab_report(_outcome("", tmp_path), baseline, [])
    assert "- next: the head changed training beyond what the A/A pairs vary by" in plain


def test_the_ranked_next_steps_and_their_readings_are_rendered_as_the_verdict_holds_them(tmp_path: Path) -> None:
    baseline = load_baseline(write_yaml(tmp_path / "t.yaml", BASELINE))
    findings = (TriageFinding("loss-term", "a loss term changed", "entropy led by 8 steps", primary=True),
                TriageFinding("gradual", "the training loop", "entropy breached", rank=2, why_ranked="broader"))
    reading = Measured("loss term", "per step against the noise", True, "entropy below from step 2")
    verdict = PairedVerdict("FAIL", (), (11,), next_step="a loss term changed", triage=findings, measured=(reading,))
    outcome = AbOutcome("t", Side("base", "main"), Side("head", "pr"), verdict, (), tmp_path)
    report = render_ab_report(outcome, baseline, [])
    assert "## Next steps" in report and "\"the golden\" below is the base" in report
    assert "1. **a loss term changed** — rule `loss-term`; evidence: entropy led by 8 steps" in report
    assert "2. the training loop — rule `gradual`; evidence: entropy breached; ranked below: broader" in report
    assert "| loss term | per step against the noise | yes | entropy below from step 2 |" in report
    document = outcome_document(outcome)
    assert [(f["rule"], f["primary"]) for f in document["triage"]] == [("loss-term", True), ("gradual", False)]
    assert document["measured"][0]["holds"] is True and document["next"] == "a loss term changed"
