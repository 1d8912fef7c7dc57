from __future__ import annotations

import re

import shutil

from autotest.calibration.runs import baseline_files
from autotest.inputs.baseline import load_baseline
from tests.integration.calibration.test_runs import fake_case  # noqa: F401  (fixture)
from tests.helpers import run_cli as cli


def test_calibrate_then_promote_through_the_cli(fake_case, tmp_path, capsys):  # noqa: F811
    case, baselines, _ = fake_case
    code = cli("calibrate", str(case.source), "--runs", "2", "--jobs", "2", "--baselines-dir", str(baselines),
               "--results-dir", str(tmp_path / "results"))
    out = capsys.readouterr().out
    target, candidate, report = baseline_files(case, baselines)
    assert code == 0, out
    assert f"candidate: {candidate}" in out and f"report: {report}" in out
    # the fake runs' k3 is fp32-sized (1e-14): the declared 1e-4 floor is capped at 1000 x that level
    assert re.search(r"mismatch/mismatch_k3_kl\[stepwise\]: 0\.0001 -> [0-9.]+e-11 \(calibrated\)", out), out
    assert "self-check: leave-one-out false alarms" in out
    command = load_baseline(candidate).provenance["command"]
    assert command.startswith(f"rl-autotest calibrate {case.source} --runs 2 --jobs 2 --results-dir")
    assert cli("baseline", "promote", str(case.source), "--baselines-dir", str(baselines)) == 0
    assert f"promoted: {target}" in capsys.readouterr().out
    assert load_baseline(target).provenance["runs"] == 2


def test_promote_flag_writes_the_baseline_in_one_go(fake_case, tmp_path, capsys):  # noqa: F811
    case, baselines, _ = fake_case
    code = cli("calibrate", str(case.source), "--runs", "3", "--out", str(baselines), "--promote",
               "--results-dir", str(tmp_path / "results"))
    out = capsys.readouterr().out
    target, candidate, _ = baseline_files(case, baselines)
    assert code == 0, out
    assert f"promoted: {target}" in out and not candidate.exists()
    assert load_baseline(target).provenance["produced_by"] == "rl-autotest calibrate"


def test_promote_flag_is_withheld_when_the_self_check_false_alarms(fake_case, tmp_path, monkeypatch,  # noqa: F811
                                                                   capsys):
    case, baselines, _ = fake_case
    monkeypatch.setenv("FAKE_OUTLIER_SEED", "2")  # one run unlike the others: leave-one-out catches it
    target, candidate, report = baseline_files(case, baselines)
    before = target.read_text()
    code = cli("calibrate", str(case.source), "--runs", "3", "--out", str(baselines), "--promote",
               "--results-dir", str(tmp_path / "results"))
    captured = capsys.readouterr()
    assert code == 1
    assert "not promoted: the self-check raised false alarms" in captured.out
    assert "warning: leave-one-out: " in captured.err
    assert target.read_text() == before and candidate.exists()
    assert "| run 3 (seed 2) | FAIL | response/rewards/mean[percentile]" in report.read_text()


def test_promote_without_a_candidate_is_a_usage_error(fake_case, capsys):  # noqa: F811
    case, baselines, _ = fake_case
    assert cli("baseline", "promote", str(case.source), "--baselines-dir", str(baselines)) == 2
    assert "fake-calib.candidate.yaml: no candidate to promote" in capsys.readouterr().out


def test_a_broken_candidate_is_not_promoted(fake_case, capsys):  # noqa: F811
    case, baselines, _ = fake_case
    target, candidate, _ = baseline_files(case, baselines)
    shutil.copyfile(target, candidate)
    candidate.write_text(candidate.read_text().replace("schema_version: 1", "schema_version: 1\nbogus: 1"))
    before = target.read_text()
    assert cli("baseline", "promote", str(case.source), "--baselines-dir", str(baselines)) == 2
    assert "bogus: unknown key" in capsys.readouterr().out
    assert target.read_text() == before and candidate.exists()


def test_a_failed_calibration_run_exits_2(fake_case, tmp_path, monkeypatch, capsys):  # noqa: F811
    case, baselines, _ = fake_case
    monkeypatch.setenv("FAKE_CRASH_SEED", "0")
    assert cli("calibrate", str(case.source), "--runs", "2", "--baselines-dir", str(baselines),
               "--results-dir", str(tmp_path / "results")) == 2
    assert "calibration failed: fake-calib: 1 of 2 calibration runs did not complete" in capsys.readouterr().err
