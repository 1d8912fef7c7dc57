"""benchmarks/explanations.py's scoring of a triage against a regression's documented next step (issue 44 item 7):
the documented rule, ``triage_also``, ``names`` and ``not_names``; and every unseen regression documents only what
the scorer reads."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import explanations  # noqa: E402

from autotest.workloads.regressions import REGRESSIONS  # noqa: E402

SCORED = {"verdict", "breached", "triage", "triage_also", "names", "not_names", "ab", "consistency", "period",
          "measured"}


def test_the_documented_rule_or_one_with_the_same_next_step_is_right_else_wrong() -> None:
    want = {"triage": "loss-term", "triage_also": ["gradual"]}
    assert explanations.triage_score(want, "loss-term", "", "") == "right"
    assert explanations.triage_score(want, "gradual", "", "") == "right"
    assert explanations.triage_score(want, "logging-units", "", "") == "wrong"
    assert explanations.triage_score(want, "logging-units", "gradual", "") == "uncertain"
    assert explanations.triage_score(want, "loss-term", "gradual", "") == "uncertain"  # a two-rule line


def test_a_right_rule_without_the_documented_phrase_or_with_several_causes_is_uncertain() -> None:
    want = {"triage": "resume", "names": "prompt order", "not_names": ["(prompt order or sampling)"]}
    assert explanations.triage_score(want, "resume", "", "the data loader's prompt order was not restored") == "right"
    assert explanations.triage_score(want, "resume", "", "the rollout engine's weights") == "uncertain"
    assert explanations.triage_score(want, "resume", "", "the RNG (prompt order or sampling)") == "uncertain"
    assert explanations.triage_score(want, "gradual", "", "prompt order") == "wrong"


def test_every_unseen_regression_documents_only_what_the_benchmark_reads() -> None:
    for name in explanations.UNSEEN:
        expected = REGRESSIONS[name].expected
        assert set(expected) <= SCORED, (name, set(expected) - SCORED)
        if "ab" in expected:
            assert expected["ab"]["verdict"] in ("PASS", "FAIL") and explanations.case_of(name) == "tiny-grpo"
    assert {"seq-mean-loss", "entropy-from-next-step", "prompts-drawn-twice", "sync-half-buffer",
            "sync-swap-before-copy", "resume-loader-state-lost", "teacher-keys-renamed"} <= set(explanations.UNSEEN)
    assert explanations.case_of("teacher-keys-renamed") == "tiny-mopd"
