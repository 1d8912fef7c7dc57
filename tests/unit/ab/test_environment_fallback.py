"""The nightly's A/B fallback decision: a framework case whose golden was calibrated in another environment is
judged A/B against the last trusted passing commit; otherwise the golden gate runs, and the reason says why."""

from __future__ import annotations

import copy
from dataclasses import replace

from autotest.ab.environment_fallback import environment_fallback, last_trusted_commit
from autotest.history.store import RunRow
from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import load_case
from tests.helpers import ROOT

FRAMEWORK_CASE = "grpo-gsm8k-qwen3-8b-lmdeploy"  # names xtuner as its framework
GOLDEN_ENV = {"python": "3.11.7", "machine": "x86_64",
              "packages": {"torch": "2.5.1", "xtuner": "1.0.0"},
              "gpu": {"count": 8, "models": ["NVIDIA H100"], "driver": "550.54", "cuda": "12.4"}}


def _baseline(environment):
    baseline = load_baseline(ROOT / "baselines" / "tiny-grpo.yaml")
    return replace(baseline, provenance={**baseline.provenance, "environment": environment})


def _run(run_id: int, status: str, sha: str | None, kind: str = "gate", trusted: bool = True) -> RunRow:
    return RunRow(run_id, FRAMEWORK_CASE, f"/r/{run_id}", f"2026-12-0{run_id}T00:00:00", status, sha, None, "8xH100",
                  kind=kind, marked_trusted=trusted)


HISTORY = [_run(1, "PASS", "aaa111"), _run(2, "PASS", "bbb222"), _run(3, "PASS", "ccc333", trusted=False),
           _run(4, "FAIL", "ddd444"), _run(5, "PASS", "eee555", kind="bisect"), _run(6, "PASS", None)]


def test_the_last_trusted_passing_gate_run_with_a_commit_is_the_base():
    assert last_trusted_commit(HISTORY) == "bbb222"
    assert last_trusted_commit([]) is None


def test_a_new_driver_judges_the_case_a_b_against_the_last_trusted_commit():
    today = copy.deepcopy(GOLDEN_ENV)
    today["gpu"]["driver"] = "560.35"
    today["packages"]["xtuner"] = "1.1.0"  # the code under test, not the environment
    fallback, why = environment_fallback(load_case(FRAMEWORK_CASE), _baseline(GOLDEN_ENV), today, HISTORY)
    assert fallback is not None and why == ""
    assert fallback.base_sha == "bbb222" and fallback.changes == ("gpu driver 550.54 -> 560.35",)
    assert fallback.line().startswith("the golden's environment is not today's (gpu driver 550.54 -> 560.35): "
                                      "judged A/B against the last trusted commit bbb222")


def test_the_golden_gate_runs_when_nothing_changed_or_nothing_to_go_back_to():
    case = load_case(FRAMEWORK_CASE)
    assert environment_fallback(case, _baseline(GOLDEN_ENV), GOLDEN_ENV, HISTORY) == (
        None, "the golden's environment is today's")
    today = {**GOLDEN_ENV, "python": "3.12.1"}
    fallback, why = environment_fallback(case, _baseline(GOLDEN_ENV), today, HISTORY[2:])
    assert fallback is None and "python 3.11.7 -> 3.12.1" in why and "no trusted passing run" in why
    fallback, why = environment_fallback(load_case("tiny-grpo"), _baseline(GOLDEN_ENV), today, HISTORY)
    assert fallback is None and why.startswith("the case names no framework")
