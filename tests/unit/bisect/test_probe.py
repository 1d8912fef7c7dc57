"""A bisect probe's runs say what they are, so the history never trusts them."""

from __future__ import annotations

from autotest.bisect.probe import probe
from autotest.inputs.case import load_case
from autotest.case_run import SKIP, CaseRun, RunOptions
from tests.helpers import DATA


def test_a_probe_runs_as_kind_bisect_and_records_nothing(tmp_path) -> None:
    case = load_case(DATA / "cases" / "scripted.yaml")
    seen: list[RunOptions] = []

    def run(case_, options: RunOptions) -> CaseRun:
        seen.append(options)
        return CaseRun(case_.name, SKIP, None, reason="not here")

    probe(case, "abc123", "/repo", tmp_path, RunOptions(after_results=lambda folder: []), run=run)
    assert [(o.kind, o.after_results) for o in seen] == [("bisect", None)]
    assert RunOptions(fault="lr-scale:0.1", purpose="bisect").kind == "fault"
