"""Changes in noise from recorded nightlies: a statistic whose scatter grew is reported by ``history drift`` (exit 1)
and after each verdict, beside the mean's drift; a metric whose noise stayed is not."""

from __future__ import annotations

import numpy as np
import pytest

from autotest.cli import main
from autotest.history.drift import SpreadFinding, record_and_detect, render_drift_lines, spread_in
from autotest.history.store import HistoryStore, ingest
from tests.unit.history.builders import REWARDS, STEP_TIME, THRESHOLDS, write_replicated_nightlies, write_results_folder


@pytest.fixture(autouse=True)
def _no_env_history(monkeypatch) -> None:
    monkeypatch.delenv("RL_AUTOTEST_HISTORY", raising=False)


def _noisier_nightlies(root, nights: int = 40, from_night: int = 21, sd_ratio: float = 4.0):
    """Rewards at 0.3 of their threshold, sd 0.1 of it, the sd ``sd_ratio`` times from ``from_night``; step time
    steady (sd 0.1 throughout)."""
    rng = np.random.default_rng(3)
    folders = []
    for night in range(1, nights + 1):
        sd = 0.1 * (sd_ratio if night >= from_night else 1.0)
        rewards = (0.3 + rng.normal(0, sd)) * THRESHOLDS[REWARDS]
        step_time = (0.3 + rng.normal(0, 0.1)) * THRESHOLDS[STEP_TIME]
        folders.append(write_results_folder(root, "c", night, {REWARDS: rewards, STEP_TIME: step_time}))
    return folders


def test_a_noisier_statistic_is_a_noise_finding_and_history_drift_exits_1(tmp_path, capsys) -> None:
    _noisier_nightlies(tmp_path)
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    ingest([tmp_path], url)
    with HistoryStore.open(url, read_only=True) as store:
        [finding] = spread_in(store, "c")
    assert isinstance(finding, SpreadFinding) and finding.check_id == REWARDS and finding.ratio > 2
    assert 18 <= 40 - finding.runs_since + 1 <= 24  # the night it began, give or take the noise
    [line] = render_drift_lines([finding])
    assert line.startswith(f"noise: c {REWARDS}: scatter ") and "how much it varies did" in line
    assert main(["history", "drift", "--case", "c", "--history", url]) == 1
    assert f"noise: c {REWARDS}" in capsys.readouterr().out


def test_the_noise_finding_comes_with_the_verdict_that_records_it(tmp_path) -> None:
    folders = _noisier_nightlies(tmp_path / "results")
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    for folder in folders[:-1]:
        record_and_detect(folder, url)
    recorded, findings = record_and_detect(folders[-1], url)
    assert recorded and [type(f).__name__ for f in findings] == ["SpreadFinding"]


def test_replicates_that_agree_less_are_a_noise_finding_between_replicates(tmp_path) -> None:
    write_replicated_nightlies(tmp_path / "results")
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    ingest([tmp_path / "results" / "c"], url)
    with HistoryStore.open(url, read_only=True) as store:
        found = [f for f in spread_in(store, "c") if f.among == "replicates"]
    [finding] = found
    assert finding.check_id == REWARDS and finding.ratio > 2 and finding.since.results_dir.endswith("/r0")
    assert "night-25/replicates" in finding.since.results_dir and finding.runs_since == 16
    [line] = render_drift_lines([finding])
    assert f"noise: c {REWARDS}: scatter between replicates " in line and "16 nights" in line
