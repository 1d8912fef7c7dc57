"""A bisect probe's runs say what they are, so the history never trusts them."""

from __future__ import annotations

from autotest.bisect.probe import ambiguous, probe
from autotest.judge.model import FAIL, CheckResult, Verdict
from autotest.inputs.case import load_case
from autotest.pipeline import SKIP, CaseRun, JudgeOptions, LaunchOptions, PublishOptions, RunOptions
from tests.helpers import DATA


def test_a_probe_runs_as_kind_bisect_and_records_nothing(tmp_path) -> None:
    case = load_case(DATA / "cases" / "scripted.yaml")
    seen: list[RunOptions] = []

    def run(case_, options: RunOptions) -> CaseRun:
        seen.append(options)
        return CaseRun(case_.name, SKIP, None, reason="not here")

    probe(case, "abc123", "/repo", tmp_path, RunOptions(publish=PublishOptions(after_results=lambda folder: [])),
          run=run)
    assert [(o.kind, o.publish.after_results) for o in seen] == [("bisect", None)]
    assert RunOptions(LaunchOptions(fault="lr-scale:0.1"), JudgeOptions(purpose="bisect")).kind == "fault"


def _verdict(*gates: tuple[str, str, float]) -> Verdict:
    """A verdict of accuracy gates (check id, status, observed / threshold)."""
    results = tuple(CheckResult(check_id, status, "", metric=check_id, method="absolute", threshold=1.0,
                                observed=ratio) for check_id, status, ratio in gates)
    return Verdict(FAIL if any(s == FAIL for _, s, _ in gates) else "PASS", "c", results)


def test_a_gate_near_its_threshold_asks_for_more_seeds() -> None:
    assert ambiguous(_verdict(("a", "PASS", 0.9), ("b", "PASS", 0.2))) == ["a at 0.90 x its threshold"]
    assert ambiguous(_verdict(("a", FAIL, 1.2), ("b", "PASS", 0.2))) == ["a at 1.20 x its threshold"]
    assert ambiguous(_verdict(("a", "PASS", 0.5), ("b", "PASS", 1.4 / 2))) == []


def test_a_clear_failure_decides_whatever_another_gate_says() -> None:
    # one gate far past its threshold: the run is bad, a second gate in the grey zone changes nothing
    assert ambiguous(_verdict(("near", "PASS", 0.9), ("far", FAIL, 3.0))) == []
    assert ambiguous(_verdict(("near", FAIL, 1.1), ("nan", FAIL, float("nan")))) == []
