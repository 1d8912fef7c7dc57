"""``rl-autotest baseline promote --shadow``: a shadow gate that held in the history becomes a gate, in place
(autotest.calibration.promote.promote_shadow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.inputs.baseline import load_baseline
from tests.helpers import DATA, run_cli, write_yaml
from tests.unit.history.test_shadow_ready import KL_CHECK, night, url
from tests.unit.judge.test_shadow import REWARDS, tracker

REWARDS_CHECK = f"{REWARDS}[stepwise]"


@pytest.fixture(autouse=True)
def _no_env_history(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RL_AUTOTEST_HISTORY", raising=False)


def case_file(tmp_path: Path, shadow: bool = False) -> Path:
    """Case ``shadowed`` whose baseline is the one ``night`` judges with (tmp_path/shadowed.yaml)."""
    text = (DATA / "bad_cases" / "bad_shadow.yaml").read_text().replace("bad_shadow", "shadowed")
    text = text.replace("baseline: baselines/x.yaml", "baseline: shadowed.yaml")
    return write_yaml(tmp_path / "cases" / "shadowed.yaml",
                      text.replace('shadow: "yes"\n', "shadow: true\n" if shadow else ""))


def promote(tmp_path: Path, *argv: str) -> int:
    return run_cli("baseline", "promote", str(case_file(tmp_path)), "--baselines-dir", str(tmp_path), *argv,
                   "--history", url(tmp_path))


def nights(tmp_path: Path, count: int, false_alarm_on: int | None = None) -> None:
    for n in range(1, count + 1):
        assert night(tmp_path, n, kl=0.01 if n == false_alarm_on else 0.001) == 0


def test_a_held_shadow_gate_is_promoted_to_gate_and_then_blocks(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    nights(tmp_path, 3)
    before = (tmp_path / "shadowed.yaml").read_text()
    capsys.readouterr()
    assert promote(tmp_path, "--shadow", KL_CHECK, "--nights", "3") == 0
    out = capsys.readouterr().out
    assert f"  shadow -> gate: {KL_CHECK}\n" in out and "previous baseline kept: " in out
    after = (tmp_path / "shadowed.yaml").read_text()
    comment, rest = after.split("\n", 1)
    assert comment.startswith("# shadow promoted to gate ") and f"{KL_CHECK} (yes)" in comment
    assert rest == before.replace("severity: shadow", "severity: gate")  # nothing else in the file moved
    assert [c.severity for c in load_baseline(tmp_path / "shadowed.yaml").checks] == ["gate", "gate"]
    [backup] = tmp_path.glob("shadowed.yaml.bak-*")
    assert backup.read_text() == before
    # the promoted gate now decides the run
    assert run_cli("compare", "--baseline", str(tmp_path / "shadowed.yaml"), "--current",
                   str(tracker(tmp_path / "after", kl=0.01)), "--no-history") == 1


def test_shadow_ready_promotes_every_ready_one(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    nights(tmp_path, 3)
    assert promote(tmp_path, "--shadow-ready", "--nights", "3") == 0
    assert f"shadow -> gate: {KL_CHECK}" in capsys.readouterr().out


def test_a_shadow_gate_not_ready_is_refused_unless_forced(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    nights(tmp_path, 3, false_alarm_on=2)
    before = (tmp_path / "shadowed.yaml").read_text()
    capsys.readouterr()
    assert promote(tmp_path, "--shadow", KL_CHECK, "--nights", "3") == 2
    assert capsys.readouterr().out == (
        f"rl-autotest: error: {tmp_path / 'shadowed.yaml'}: not promoted: {KL_CHECK} no: 1 false alarm(s), 0 allowed; "
        "let it hold more nights (rl-autotest history promote-ready), or pass --force REASON after review\n")
    assert (tmp_path / "shadowed.yaml").read_text() == before and not list(tmp_path.glob("*.bak-*"))
    assert promote(tmp_path, "--shadow-ready", "--nights", "3") == 2
    assert "no shadow gate is ready to block over the last 3 trusted night(s)" in capsys.readouterr().out
    assert promote(tmp_path, "--shadow", KL_CHECK, "--nights", "3", "--force", "the false alarm was node 7") == 0
    assert "forced: the false alarm was node 7 (recorded in the baseline)" in capsys.readouterr().out
    assert "forced: the false alarm was node 7" in (tmp_path / "shadowed.yaml").read_text().splitlines()[0]


@pytest.mark.parametrize(("check", "message"), [
    (REWARDS_CHECK, f"not promoted: {REWARDS_CHECK} is severity: gate, not shadow; only a shadow gate is promoted"),
    ("nope[final]", f"checks: no check nope[final] (its checks: {REWARDS_CHECK}, {KL_CHECK})"),
])
def test_a_check_that_is_not_shadow_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture, check: str,
                                                message: str) -> None:
    nights(tmp_path, 1)
    capsys.readouterr()
    assert promote(tmp_path, "--shadow", check, "--force", "anyway") == 2
    err = capsys.readouterr().out
    assert err.count("\n") == 1 and message in err


def test_a_case_in_shadow_is_refused_naming_its_key(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    nights(tmp_path, 1)
    case = case_file(tmp_path, shadow=True)
    capsys.readouterr()
    assert run_cli("baseline", "promote", str(case), "--baselines-dir", str(tmp_path), "--shadow", KL_CHECK,
                   "--history", url(tmp_path)) == 2
    assert capsys.readouterr().out == (f"rl-autotest: error: {case}: shadow: true keeps every gate of the case in "
                                       "shadow; remove that key to make its gates block (the baseline's checks are "
                                       "gates already)\n")


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--nights", "seven", "--nights: 'seven' is not a whole number; give e.g. --nights 7"),
    ("--nights", "0", "--nights: 0 is below 1; give e.g. --nights 7"),
    ("--allowed", "-1", "--allowed: -1 is below 0; give e.g. --allowed 0"),
    ("--nights", "100000", "--nights: 100000 is above 3650; give e.g. --nights 7"),
])
def test_a_bad_count_of_nights_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture, flag: str, value: str,
                                           message: str) -> None:
    nights(tmp_path, 1)
    capsys.readouterr()
    assert promote(tmp_path, "--shadow", KL_CHECK, f"{flag}={value}") == 2
    assert capsys.readouterr().out == f"rl-autotest: error: {message}\n"
