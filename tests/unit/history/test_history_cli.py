"""``rl-autotest history``: the commands on a SQLite history, and one clear line for every bad input."""

from __future__ import annotations

import json
import socket

import pytest

from autotest.cli import main
from tests.unit.history.builders import REWARDS, write_nightlies, write_results_folder


@pytest.fixture(autouse=True)
def _no_env_history(monkeypatch) -> None:
    monkeypatch.delenv("RL_AUTOTEST_HISTORY", raising=False)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ingest_show_drift_and_dashboard_on_the_default_sqlite(tmp_path, capsys) -> None:
    root = tmp_path / "results"
    write_nightlies(root, "c", nights=6, seed=0)
    assert main(["history", "ingest", str(root)]) == 0
    assert capsys.readouterr().out == f"history sqlite:///{root / 'history.sqlite'}: recorded 6 run(s), 0 already recorded\n"
    assert main(["history", "ingest", str(root / "c" / "night-02")]) == 0
    assert "recorded 0 run(s), 1 already recorded" in capsys.readouterr().out
    assert main(["history", "show", "c", "--results-dir", str(root), "--last", "2"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0].split() == ["run", "started_at", "status", "trusted", "framework", "harness", "hardware", "not",
                                "passing", "results"]
    assert len(shown) == 3 and "night-06" in shown[-1]
    assert main(["history", "show", "c", "--results-dir", str(root), "--metric", "response/rewards/mean"]) == 0
    header = capsys.readouterr().out.splitlines()[0].split()
    assert header[-5:] == ["final", "mean", "last_window_mean", "num_steps", REWARDS]
    assert main(["history", "drift", "--results-dir", str(root)]) == 0
    assert capsys.readouterr().out == "no drift: c, 2 gated statistics over 6 runs\n"
    assert main(["history", "dashboard", "--results-dir", str(root), "--out", str(tmp_path / "site")]) == 0
    assert (tmp_path / "site" / "index.html").read_text().count('<svg class="trend"') == 2


def _corrupt(tmp_path):
    folder = write_results_folder(tmp_path, "c", 1, {})
    (folder / "results.json").write_text('{"case": "c", "stat')
    return [str(folder)]


def _ingested(root, argv: list[str]) -> list[str]:
    write_nightlies(root, "c", nights=2)
    assert main(["history", "ingest", str(root)]) == 0
    return argv


def _edited(root, **changes) -> str:
    folder = write_results_folder(root, "c", 1, {REWARDS: 0.01})
    data = json.loads((folder / "results.json").read_text())
    if "observed" in changes:
        data["results"][1]["observed"] = changes.pop("observed")
    data.update(changes)
    (folder / "results.json").write_text(json.dumps(data))
    return str(folder)


def _foreign_results(root) -> str:
    folder = root / "other-tool"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps({"status": "ok", "case": "c", "score": 0.9}))
    return str(folder)


BAD_INPUTS = {
    "folder without results.json": (lambda p: ["history", "ingest", str(p)], "no results.json in it or below"),
    "missing folder": (lambda p: ["history", "ingest", str(p / "nope")], "no such file or directory"),
    "corrupt results.json": (lambda p: ["history", "ingest", *_corrupt(p)], "not valid JSON"),
    "bad URL": (lambda p: ["history", "drift", "--history", "oracle://x/y"], "back end 'oracle' is not supported"),
    "unreachable database": (lambda p: ["history", "drift", "--history",
                                        f"postgresql://u@127.0.0.1:{_closed_port()}/h"],
                             "cannot open history database postgresql://u@127.0.0.1"),
    "no history yet": (lambda p: ["history", "show", "c", "--results-dir", str(p)],
                       "no runs in sqlite:///"),
    "malformed URL": (lambda p: ["history", "drift", "--history", "not a url"], "'not a url' is not a history URL"),
    "typo in the scheme": (lambda p: ["history", "show", "c", "--history", "postgres//oops"],
                           "'postgres//oops' is not a history URL"),
    "non-numeric port": (lambda p: ["history", "drift", "--history", "postgresql://u@h:abc/db"],
                         "the port is not a number"),
    "ingest schema_version 99": (lambda p: ["history", "ingest", _edited(p, schema_version=99)],
                                 "key 'schema_version' is 99"),
    "ingest another tool's file": (lambda p: ["history", "ingest", _foreign_results(p)],
                                   "no key 'schema_version'; is this an rl-autotest results.json?"),
    "ingest status MAYBE": (lambda p: ["history", "ingest", _edited(p, status="MAYBE")],
                            "key 'status' is 'MAYBE'; expected one of PASS, FAIL, ERROR"),
    "ingest observed abc": (lambda p: ["history", "ingest", _edited(p, observed="abc")],
                            "key 'results[1].observed' is 'abc'; expected a number"),
    "dashboard into a file": (lambda p: _ingested(p, ["history", "dashboard", "--results-dir", str(p), "--out",
                                                      str(p / "c" / "night-01" / "results.json")]),
                              "results.json: is not a folder"),
    "dashboard into /dev/null": (lambda p: _ingested(p, ["history", "dashboard", "--results-dir", str(p),
                                                         "--out", "/dev/null"]), "--out /dev/null: is not a folder"),
    "untrust without a reason": (lambda p: _ingested(p, ["history", "untrust", "1", "--why", " ",
                                                         "--results-dir", str(p)]), "--why: say why"),
    "untrust an unknown run": (lambda p: _ingested(p, ["history", "untrust", "99", "--why", "x",
                                                       "--results-dir", str(p)]), "RUN 99: no run with this id"),
    "untrust a folder never recorded": (lambda p: _ingested(p, ["history", "untrust", str(p), "--why", "x",
                                                                "--results-dir", str(p)]),
                                        "no run recorded from results folder"),
    "unknown case": (lambda p: _ingested(p, ["history", "show", "other", "--results-dir", str(p)]),
                     "no runs of case 'other' in the history (cases: c)"),
}


@pytest.mark.parametrize("name", BAD_INPUTS)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, name) -> None:
    argv, message = BAD_INPUTS[name]
    args = argv(tmp_path)
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("rl-autotest: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_bad_last_is_an_argparse_error(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["history", "show", "c", "--last", "0"])
    assert exit_.value.code == 2 and "must be at least 1, got 0" in capsys.readouterr().err


def test_corrupt_history_file_is_one_clear_error(tmp_path, capsys) -> None:
    (tmp_path / "history.sqlite").write_bytes(b"not a database" * 100)
    assert main(["history", "drift", "--results-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "cannot open history database" in err and "file is not a database" in err


def test_results_json_written_by_compare_is_ingestible(tmp_path, capsys) -> None:
    folder = write_results_folder(tmp_path, "c", 1, {REWARDS: 0.01})
    data = json.loads((folder / "results.json").read_text())
    data["context"] = {}
    (folder / "results.json").write_text(json.dumps(data))
    (folder / "preflight.json").unlink()
    assert main(["history", "ingest", str(folder), "--results-dir", str(tmp_path)]) == 0
    assert "recorded 1 run(s)" in capsys.readouterr().out
