"""The history hook of ``compare``/``run``/the plugin: a record that could not be written is never silent."""

from __future__ import annotations

import json
import socket

import pytest

from autotest.cli import main
from tests.helpers import ROOT
from tests.unit.judge.test_checks import mopd_tracker

MOPD = ROOT / "baselines" / "mopd-qwen3-vl-2b.yaml"


@pytest.fixture(autouse=True)
def _no_env_history(monkeypatch) -> None:
    monkeypatch.delenv("RL_AUTOTEST_HISTORY", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def _down() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"postgresql://ci@127.0.0.1:{port}/history"


def _compare(tmp_path, *extra: str) -> list[str]:
    return ["compare", "--baseline", str(MOPD), "--current", str(mopd_tracker(tmp_path)), "--no-plots",
            "--out", str(tmp_path / "out"), *extra]


def test_an_unreachable_history_is_a_warning_and_a_field_in_results_json(tmp_path, capsys) -> None:
    url = _down()
    assert main(_compare(tmp_path, "--history", url)) == 0
    captured = capsys.readouterr()
    [warning] = [line for line in captured.err.splitlines() if line.startswith("warning: ")]
    assert f"{tmp_path / 'out'}: verdict not recorded in the run history: cannot open history database " \
           f"{url}" in warning
    assert any(line.startswith("mopd-qwen3-vl-2b: PASS") for line in captured.out.splitlines())
    history = json.loads((tmp_path / "out" / "results.json").read_text())["history"]
    assert history["recorded"] is False and history["url"] == url and "cannot open history database" in history["error"]


def test_strict_history_turns_it_into_an_error_verdict_and_exit_2(tmp_path, capsys) -> None:
    assert main(_compare(tmp_path, "--history", _down(), "--strict-history")) == 2
    captured = capsys.readouterr()
    assert "(--strict-history: the verdict is ERROR)" in captured.err
    assert "ERROR history[recorded]: the verdict could not be recorded in the run history" in captured.out
    assert any(line.startswith("mopd-qwen3-vl-2b: ERROR") for line in captured.out.splitlines())
    assert json.loads((tmp_path / "out" / "results.json").read_text())["status"] == "ERROR"


def test_a_misplaced_history_in_the_environment_is_refused_before_judging(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("RL_AUTOTEST_HISTORY", "history.sqlite")
    monkeypatch.chdir(tmp_path)
    assert main(_compare(tmp_path)) == 2
    err = capsys.readouterr().err
    assert "$RL_AUTOTEST_HISTORY: 'history.sqlite' is not a history URL" in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists() and not (tmp_path / "history.sqlite").exists()


@pytest.mark.parametrize("extra, message", [
    (["--strict-history", "--no-history"], "--strict-history and --no-history contradict each other"),
    (["--history", "not a url"], "--history: 'not a url' is not a history URL"),
])
def test_contradictory_or_malformed_history_flags_are_one_line(tmp_path, capsys, extra, message) -> None:
    assert main(_compare(tmp_path, *extra)) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_strict_history_without_out_is_one_line(tmp_path, capsys) -> None:
    argv = ["compare", "--baseline", str(MOPD), "--current", str(mopd_tracker(tmp_path)), "--strict-history"]
    assert main(argv) == 2
    assert "--strict-history: only with --out" in capsys.readouterr().err


def test_a_recorded_run_has_no_history_field_and_is_recorded_once(tmp_path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    assert main(_compare(tmp_path, "--history", url, "--strict-history")) == 0
    assert "history" not in json.loads((tmp_path / "out" / "results.json").read_text())
    assert main(["history", "ingest", str(tmp_path / "out"), "--history", url]) == 0
    assert "recorded 0 run(s), 1 already recorded" in capsys.readouterr().out
