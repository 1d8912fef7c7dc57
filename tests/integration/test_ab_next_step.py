"""A failed A/B on tiny-grpo names the same kind of next step a golden FAIL does (issue 44), real 45-step runs on seed
11 judged by the committed ``paired:`` section: a metric logged from the previous step is logging, never "changed
training"; the entropy term's sign flipped is a loss term. The base run is shared by both (3 runs in all)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from autotest.ab.interleave import AB_JSON, AbOptions, judge_results_folders, side_request
from autotest.ab.sides import parse_side
from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import load_case
from autotest.judge.model import FAIL
from autotest.pipeline import run_case
from tests.helpers import ROOT, run_cli
from tests.shared_build import content_key, shared_build

pytestmark = pytest.mark.slow

SEED = 11
LENGTH = "response/response_len/mean"


@pytest.fixture(scope="module")
def logged_late(tmp_path_factory) -> Path:
    """The A/B folder of clean against ``fault:log-previous`` (the response length logged from the previous step),
    run by the CLI, whose output is kept beside it."""

    def build(folder: Path) -> None:
        with contextlib.redirect_stdout(io.StringIO()) as out:
            code = run_cli("ab", "tiny-grpo", "--base", "clean", "--head", "fault:log-previous", "--seeds", str(SEED),
                           "--results-dir", str(folder), "--no-plots")
        (folder / "cli.txt").write_text(f"exit {code}\n{out.getvalue()}")

    key = content_key("ab-log-previous", SEED, files=(ROOT / "baselines" / "tiny-grpo.yaml",))
    built = shared_build(tmp_path_factory, "ab-log-previous", key, build)
    return next(built.glob("tiny-grpo/ab-*"))


def test_a_metric_logged_from_the_previous_step_is_logging_not_changed_training(logged_late):
    said = (logged_late.parent.parent / "cli.txt").read_text()
    assert said.startswith("exit 1\n") and f"next step: logging, not training: {LENGTH} moved" in said
    document = json.loads((logged_late / AB_JSON).read_text())
    assert document["status"] == FAIL and {g["metric"] for g in document["gates"] if g["status"] == FAIL} == {LENGTH}
    assert document["next"].startswith(f"logging, not training: {LENGTH} moved while the 4 other paired metrics")
    assert "the head logged from the previous step" in document["next"]
    assert [f["rule"] for f in document["triage"]] == ["logging-units"]
    report = (logged_late / "ab.md").read_text()
    assert "changed training" not in report and "## Next steps" in report and "logging/units" in report


def test_an_entropy_term_with_its_sign_flipped_is_a_loss_term(logged_late, tmp_path):
    case = load_case("tiny-grpo")
    head = parse_side(case, "head", "fault:entropy-sign")
    head_dir = tmp_path / f"head-seed{SEED}"
    run_case(head.case_for(case), side_request(AbOptions(seeds=(SEED,)), head, SEED, head_dir))
    baseline = load_baseline(case.baseline_path)
    verdict = judge_results_folders(case, baseline, SEED, logged_late / f"base-seed{SEED}", head_dir)
    assert verdict.status == FAIL
    assert verdict.triage[0].rule == "loss-term", [(f.rule, f.evidence) for f in verdict.triage]
    reading = next(m for m in verdict.measured if m.hypothesis == "loss term")
    assert reading.holds and reading.values["metric"] == "entropy/mean" and reading.values["direction"] == "below"
    assert "a loss term changed" in verdict.next_step or verdict.next_step.startswith("loss-term or gradual")
