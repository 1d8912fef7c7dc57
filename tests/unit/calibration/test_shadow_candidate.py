"""A recalibrated candidate in shadow beside the baseline: ``baseline promote --to-shadow``, judged as
``candidate@<hash>:`` shadow gates on every verdict, ``--from-shadow`` once they held
(autotest.calibration.promote, autotest.judge.shadow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotest.inputs.baseline import load_baseline
from autotest.judge.shadow import candidate_label
from tests.helpers import run_cli
from tests.unit.calibration.test_promote_shadow import case_file
from tests.unit.history.test_shadow_ready import url
from tests.unit.judge.test_shadow import REWARDS, shadow_baseline, tracker


@pytest.fixture(autouse=True)
def _no_env_history(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RL_AUTOTEST_HISTORY", raising=False)


def baseline_and_candidate(tmp_path: Path) -> Path:
    """The blocking baseline (both checks gates) and a tighter recalibration of it as the reviewed candidate."""
    baseline = shadow_baseline(tmp_path, kl_severity="gate")
    text = baseline.read_text().replace("threshold: 0.05", "threshold: 0.01")
    text = text.replace("provenance: {runs: 5}", "provenance: {runs: 5, produced_by: rl-autotest calibrate}")
    (tmp_path / "shadowed.candidate.yaml").write_text(text)
    return baseline


def night(tmp_path: Path, n: int, rewards_shift: float = 0.0) -> Path:
    out = tmp_path / "results" / "shadowed" / f"night-{n:02d}"
    code = run_cli("compare", "--baseline", str(tmp_path / "shadowed.yaml"), "--current",
                   str(tracker(tmp_path / f"log-{n:02d}", rewards_shift=rewards_shift)), "--no-plots", "--out",
                   str(out), "--history", url(tmp_path))
    assert code == 0
    return out


def promote(tmp_path: Path, *argv: str) -> int:
    return run_cli("baseline", "promote", str(case_file(tmp_path)), "--baselines-dir", str(tmp_path), *argv,
                   "--history", url(tmp_path))


def test_a_candidate_enters_shadow_is_judged_beside_the_baseline_and_replaces_it_after_k_nights(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    baseline = baseline_and_candidate(tmp_path)
    before = baseline.read_text()
    candidate_text = (tmp_path / "shadowed.candidate.yaml").read_text()
    assert promote(tmp_path, "--to-shadow") == 0
    shadow = tmp_path / "shadowed.shadow.yaml"
    label = candidate_label(shadow)
    assert f"in shadow: {shadow}" in capsys.readouterr().out
    assert baseline.read_text() == before and not (tmp_path / "shadowed.candidate.yaml").exists()

    # the tighter candidate would have failed where the baseline passes: the run passes and says so
    folder = night(tmp_path, 1, rewards_shift=0.03)
    assert f"shadow: {label}:{REWARDS}[stepwise] would have failed (" in capsys.readouterr().out
    results = json.loads((folder / "results.json").read_text())
    assert results["status"] == "PASS"
    assert {r["check_id"]: (r["status"], r["severity"]) for r in results["results"]
            if r["check_id"].startswith("candidate@")} == {f"{label}:{REWARDS}[stepwise]": ("FAIL", "shadow"),
                                                          f"{label}:mismatch/mismatch_k3_kl[final]": ("PASS", "shadow")}

    # not held yet: refused, one line
    assert promote(tmp_path, "--from-shadow", "--nights", "3") == 2
    refused = capsys.readouterr().out
    assert refused.count("\n") == 1 and f"{label}:{REWARDS}[stepwise] no: only 1 trusted gate run(s) of 3" in refused

    for n in (2, 3, 4):
        night(tmp_path, n)
    capsys.readouterr()
    assert run_cli("history", "promote-ready", "--nights", "3", "--history", url(tmp_path)) == 0
    assert sum(f"{label}:" in line and line.endswith("yes") for line in capsys.readouterr().out.splitlines()) == 2
    assert promote(tmp_path, "--from-shadow", "--nights", "3") == 0
    assert f"promoted: {baseline}" in capsys.readouterr().out
    comment, rest = baseline.read_text().split("\n", 1)
    assert comment.startswith("# promoted from shadow ") and f"({label}, 2 gate(s) held)" in comment
    assert rest == candidate_text and not shadow.exists()
    assert [c.threshold for c in load_baseline(baseline).checks] == [0.01, 0.002]
    [backup] = tmp_path.glob("shadowed.yaml.bak-*")
    assert backup.read_text() == before


def test_a_broken_candidate_in_shadow_is_its_own_shadow_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    shadow_baseline(tmp_path, kl_severity="gate")
    (tmp_path / "shadowed.shadow.yaml").write_text("checks: []\n")
    night(tmp_path, 1)
    out = capsys.readouterr().out
    assert f"shadow: {candidate_label(tmp_path / 'shadowed.shadow.yaml')}:baseline could not decide (" in out
    assert out.rstrip().endswith("shadowed: PASS") or "\nshadowed: PASS" in out


def test_without_a_candidate_to_shadow_or_promote_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    shadow_baseline(tmp_path, kl_severity="gate")
    night(tmp_path, 1)
    capsys.readouterr()
    assert promote(tmp_path, "--to-shadow") == 2
    assert "shadowed.candidate.yaml: no candidate to put in shadow" in capsys.readouterr().out
    assert promote(tmp_path, "--from-shadow") == 2
    assert "shadowed.shadow.yaml: no candidate in shadow" in capsys.readouterr().out
    assert promote(tmp_path, "--to-shadow", "--from-shadow") == 2
    assert "are different promotions; give one" in capsys.readouterr().out
