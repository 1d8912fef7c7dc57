"""The nightly's bisect end to end on the 16-commit repository of test_bisect: two recorded nightlies (PASS at the
good commit, FAIL at the head), one bisect within the run budget, every probe in the history as a bisect run."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.bisect.nightly import NightlyBudget, annotations, run_nightly_bisect, summary_lines
from autotest.bisect.session import FOUND, BisectOptions
from autotest.history.database import sqlite_url
from autotest.history.store import HistoryStore, ingest
from autotest.inputs.case import load_case
from tests.integration.bisect.test_bisect import _git, framework  # noqa: F401 - the repository fixture
from tests.integration.run.ray_cluster import leftovers
from tests.unit.history.builders import REWARDS, write_results_folder

pytestmark = pytest.mark.slow


def test_a_pass_to_fail_flip_is_bisected_and_every_probe_recorded(framework, tmp_path: Path) -> None:  # noqa: F811
    repo, commits, culprit = framework
    nights = tmp_path / "nights"
    write_results_folder(nights, "tinyfw", 1, {REWARDS: 0.05}, sha=commits[0])
    write_results_folder(nights, "tinyfw", 2, {REWARDS: 0.5}, sha=_git(repo, "rev-parse", "main"))
    url = sqlite_url(tmp_path / "history.sqlite")
    ingest([nights], url)
    lines: list[str] = []
    report = run_nightly_bisect(url, tmp_path / "results", [nights], NightlyBudget(max_runs=12),
                                lambda name: load_case(tmp_path / f"{name}.yaml"),
                                options=BisectOptions(good="", bad="", slots=2), say=lines.append)
    outcome = report.outcomes["tinyfw"]
    assert outcome.status == FOUND and outcome.first_bad is not None and outcome.first_bad.sha == culprit, \
        "\n".join(lines)
    assert outcome.runs <= 12 and outcome.device_seconds > 0
    assert annotations(report)[0].startswith(f"::error title=bisect tinyfw::first bad commit {culprit[:12]} ")
    assert any(line.startswith("- **found**: first bad commit") for line in summary_lines(report))
    with HistoryStore.open(url, read_only=True) as store:
        rows = store.runs("tinyfw")
        (finding,) = store.findings("tinyfw")  # the dashboard marks it on the series
    assert (finding.first_bad_sha, finding.good_sha) == (culprit, commits[0])
    assert finding.bad_sha == _git(repo, "rev-parse", "main")
    assert finding.bisect_dir == str(outcome.folder)
    probes = [r for r in rows if r.kind == "bisect"]
    assert len(probes) == outcome.runs and not any(r.trusted for r in probes)
    assert {r.framework_sha for r in probes} >= {culprit, commits[0]}
    assert all(r.device_seconds and r.device_seconds > 0 for r in probes)
    assert leftovers(str(tmp_path)) == []
