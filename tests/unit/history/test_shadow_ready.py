"""``rl-autotest history promote-ready``: shadow gates recorded by real ``compare --out`` verdicts, counted over
the last K trusted gate nights (autotest.history.shadow_ready)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.history.shadow_ready import ShadowStanding, shadow_standings
from autotest.history.store import HistoryStore
from tests.helpers import run_cli
from tests.unit.judge.test_shadow import KL, shadow_baseline, tracker

KL_CHECK = f"{KL}[final]"


@pytest.fixture(autouse=True)
def _no_env_history(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RL_AUTOTEST_HISTORY", raising=False)


def night(tmp_path: Path, n: int, kl: float = 0.001, rewards_shift: float = 0.0) -> int:
    """One nightly verdict of case ``shadowed`` judged and recorded by ``compare --out``; its exit code."""
    root = tmp_path / "results"
    baseline = shadow_baseline(tmp_path)
    current = tracker(tmp_path / f"log-{n:02d}", kl=kl, rewards_shift=rewards_shift)
    return run_cli("compare", "--baseline", str(baseline), "--current", str(current), "--no-plots",
                   "--out", str(root / "shadowed" / f"night-{n:02d}"), "--history", url(tmp_path))


def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'results' / 'history.sqlite'}"


def test_a_shadow_failure_is_recorded_and_counted_never_failing_the_night(tmp_path: Path) -> None:
    assert [night(tmp_path, 1), night(tmp_path, 2, kl=0.01), night(tmp_path, 3, kl=0.01, rewards_shift=0.2)] \
        == [0, 0, 1]
    with HistoryStore.open(url(tmp_path), read_only=True) as store:
        assert [(p.status, p.observed) for p in store.check_points("shadowed", severity="shadow")] == \
            [("PASS", 0.0), ("FAIL", pytest.approx(0.009)), ("FAIL", pytest.approx(0.009))]
        assert all(p.metric != KL for p in store.check_points("shadowed"))  # drift's gates: never the shadow
        [standing] = shadow_standings(store, "shadowed", nights=3)
    # night 3's shadow FAIL came with a failing gate: a regression seen twice, not a false alarm
    assert standing == ShadowStanding("shadowed", KL_CHECK, 3, 3, judged=3, would_fail=2, false_alarms=1,
                                      undecided=0)
    assert (standing.ready, standing.why, standing.false_alarm_rate) == \
        (False, "no: 1 false alarm(s), 0 allowed", pytest.approx(1 / 3))


def test_promote_ready_lists_a_held_shadow_gate_as_ready(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for n in range(1, 5):
        assert night(tmp_path, n, kl=0.01 if n == 1 else 0.001) == 0
    capsys.readouterr()
    assert run_cli("history", "promote-ready", "--nights", "3", "--history", url(tmp_path)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["case", "check", "nights", "judged", "would", "fail", "false", "alarms",
                                "false-alarm", "rate", "ready"]
    assert lines[1].split() == ["shadowed", KL_CHECK, "3/3", "3", "0", "0", "0%", "yes"]
    assert lines[2].startswith("1 of 1 shadow gate(s) ready to block (held 3 trusted night(s)")
    # over 4 nights the first one's false alarm counts; one allowed makes it ready again
    assert run_cli("history", "promote-ready", "--nights", "4", "--case", "shadowed", "--history", url(tmp_path)) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[2:] == ["4/4", "4", "1", "1", "25%", "no:", "1", "false",
                                                                   "alarm(s),", "0", "allowed"]
    assert run_cli("history", "promote-ready", "--nights", "4", "--allowed", "1", "--history", url(tmp_path)) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[-1] == "yes"
    # too few nights, and an untrusted night is left out
    assert run_cli("history", "promote-ready", "--nights", "5", "--history", url(tmp_path)) == 0
    assert "no: only 4 trusted gate run(s) of 5" in capsys.readouterr().out
    assert run_cli("history", "untrust", str(tmp_path / "results" / "shadowed" / "night-04"), "--why", "bad node",
                   "--history", url(tmp_path)) == 0
    capsys.readouterr()
    assert run_cli("history", "promote-ready", "--nights", "3", "--history", url(tmp_path)) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[2:5] == ["3/3", "3", "1"]


def test_a_history_without_shadow_gates_says_so(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = tmp_path / "results"
    assert run_cli("compare", "--baseline", str(shadow_baseline(tmp_path, kl_severity="gate")), "--current",
                   str(tracker(tmp_path)), "--no-plots", "--out", str(root / "shadowed" / "n1"),
                   "--history", url(tmp_path)) == 0
    capsys.readouterr()
    assert run_cli("history", "promote-ready", "--history", url(tmp_path)) == 0
    assert capsys.readouterr().out == "no shadow gates in the last 7 trusted gate run(s) of any case\n"


@pytest.mark.parametrize(("argv", "message"), [
    (["--nights", "0"], "--nights: must be at least 1, got 0"),
    (["--nights", "a week"], "--nights: 'a week' is not a whole number; give e.g. --nights 7"),
    (["--allowed", "-1"], "--allowed: must be at least 0, got -1"),
    (["--case", "nope"], "no runs of case 'nope' in the history (cases: shadowed)"),
])
def test_bad_inputs_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture, argv: list[str],
                                        message: str) -> None:
    night(tmp_path, 1)
    capsys.readouterr()
    assert run_cli("history", "promote-ready", *argv, "--history", url(tmp_path)) == 2
    assert capsys.readouterr().out == f"rl-autotest: error: {message}\n"


def test_the_dashboard_says_which_shadow_gates_would_have_failed(tmp_path: Path) -> None:
    from autotest.history.dashboard import write_dashboard

    assert [night(tmp_path, 1), night(tmp_path, 2, kl=0.01)] == [0, 0]
    with HistoryStore.open(url(tmp_path), read_only=True) as store:
        page = write_dashboard(store, tmp_path / "site").read_text(encoding="utf-8")
    [line] = [line for line in page.splitlines() if 'class="shadow"' in line]
    assert f"shadow: {KL_CHECK} would have failed in run 2 (" in line and "verdict PASS; observed 0.009" in line


@pytest.mark.parametrize("action", [["promote-ready"], ["drift"]])
@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_case_name_is_refused_not_read_as_every_case(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                               action: list[str], name: str) -> None:
    assert night(tmp_path, 1) == 0
    capsys.readouterr()
    assert run_cli("history", *action, "--case", name, "--history", url(tmp_path)) == 2
    assert capsys.readouterr().out == (f"rl-autotest: error: --case: {name!r} is not a case name; give one (history "
                                       "show lists them), or leave --case out for every case\n")
