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


@pytest.mark.parametrize("value, message", [("0", "must be at least 1, got 0"),
                                            ("abc", "'abc' is not a whole number; give how many runs, e.g. 10")])
def test_a_bad_last_is_an_argparse_error(capsys, value, message) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["history", "show", "c", "--last", value])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


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


def _sqlite(path) -> str:
    return f"sqlite:///{path}"


def _one_error_line(capsys, argv: list[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("rl-autotest: error: ") and err.count("\n") == 1 and "Traceback" not in err
    return err


@pytest.mark.parametrize("action", [["show", "c"], ["drift"], ["dashboard", "--out", "site"]])
def test_readers_on_a_0_byte_file_say_no_runs_and_never_write_it(tmp_path, capsys, monkeypatch, action) -> None:
    monkeypatch.chdir(tmp_path)
    empty = tmp_path / "mine.sqlite"
    empty.touch()
    err = _one_error_line(capsys, ["history", *action, "--history", _sqlite(empty)])
    assert f"no runs in sqlite:///{empty}; record runs first" in err
    assert empty.stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["mine.sqlite"]


@pytest.mark.parametrize("action", [["show", "c"], ["drift"], ["dashboard", "--out", "site"]])
def test_readers_on_a_history_without_runs_say_so(tmp_path, capsys, action) -> None:
    from autotest.history.store import HistoryStore

    url = _sqlite(tmp_path / "history.sqlite")
    HistoryStore.open(url).close()  # migrated, no runs
    before = (tmp_path / "history.sqlite").read_bytes()
    err = _one_error_line(capsys, ["history", *action, "--history", url])
    assert f"no runs in {url}" in err
    assert (tmp_path / "history.sqlite").read_bytes() == before


def test_readers_on_a_missing_history_create_nothing(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    err = _one_error_line(capsys, ["history", "drift", "--results-dir", str(tmp_path / "results")])
    assert "no runs in sqlite:///" in err and "(no such file)" in err
    assert list(tmp_path.iterdir()) == []


def test_another_applications_sqlite_file_is_one_line(tmp_path, capsys) -> None:
    import sqlite3

    other = tmp_path / "app.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE checks (id INTEGER, note TEXT)")
    before = other.read_bytes()
    for action in (["drift"], ["show", "c"], ["ingest", _edited(tmp_path / "r", status="PASS")]):
        err = _one_error_line(capsys, ["history", *action, "--history", _sqlite(other)])
        assert "app.sqlite is not an rl-autotest history (it holds tables checks)" in err
    assert other.read_bytes() == before


@pytest.mark.parametrize("column, action", [
    ("observed", lambda tmp: ["drift"]),
    ("threshold", lambda tmp: ["dashboard", "--out", str(tmp / "site")]),
    ("observed", lambda tmp: ["show", "c", "--metric", "response/rewards/mean"]),
])
def test_text_in_a_numeric_column_is_one_line(tmp_path, capsys, column, action) -> None:
    import sqlite3

    root = tmp_path / "results"
    write_nightlies(root, "c", nights=3)
    assert main(["history", "ingest", str(root)]) == 0
    with sqlite3.connect(root / "history.sqlite") as conn:
        conn.execute(f"UPDATE checks SET {column} = 'abc' WHERE check_id = ?", (REWARDS,))
    err = _one_error_line(capsys, ["history", *action(tmp_path), "--results-dir", str(root)])
    assert f"table checks, run 1 check '{REWARDS}': column '{column}' holds 'abc', not a number" in err
    assert not (tmp_path / "site").exists()


def test_the_history_commands_default_to_run_s_results_root(tmp_path, capsys, monkeypatch) -> None:
    root = tmp_path / "elsewhere"
    write_nightlies(root, "c", nights=3)
    assert main(["history", "ingest", str(root)]) == 0
    monkeypatch.setenv("RL_AUTOTEST_RESULTS", str(root))
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["history", "show", "c"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4
    assert main(["history", "drift"]) == 0
    assert capsys.readouterr().out == "no drift: c, 2 gated statistics over 3 runs\n"


def test_a_dashboard_out_where_nothing_can_be_written_is_one_line(tmp_path, capsys) -> None:
    root = tmp_path / "results"
    write_nightlies(root, "c", nights=2)
    assert main(["history", "ingest", str(root)]) == 0
    # /proc refuses new folders even to root: the same path through the code as a read-only filesystem
    err = _one_error_line(capsys, ["history", "dashboard", "--results-dir", str(root), "--out", "/proc/site"])
    assert "--out /proc/site: cannot write the dashboard (" in err


def _project(tmp_path, monkeypatch, history: str | None) -> "Path":
    root = tmp_path / "fw"
    (root / "accuracy" / "cases").mkdir(parents=True)
    table = ('[tool.rl-autotest]\ncases = ["accuracy/cases"]\nbaselines = "accuracy/baselines"\n'
             'results = "accuracy/results"\n')
    if history is not None:
        table += f'history = "{history}"\n'
    (root / "pyproject.toml").write_text(table)
    monkeypatch.chdir(root)
    monkeypatch.delenv("RL_AUTOTEST_RESULTS", raising=False)
    monkeypatch.delenv("RL_AUTOTEST_PROJECT", raising=False)
    return root


def test_in_a_project_the_history_commands_read_the_project_s_results(tmp_path, capsys, monkeypatch) -> None:
    root = _project(tmp_path, monkeypatch, None)
    write_nightlies(root / "accuracy" / "results", "c", nights=2)
    assert main(["history", "ingest", str(root / "accuracy" / "results")]) == 0
    assert main(["history", "drift"]) == 0
    assert capsys.readouterr().out.endswith("no drift: c, 2 gated statistics over 2 runs\n")


def test_a_malformed_history_in_the_project_table_names_the_file_and_key(tmp_path, capsys, monkeypatch) -> None:
    root = _project(tmp_path, monkeypatch, "accuracy/results/history.sqlite")
    err = _one_error_line(capsys, ["history", "drift"])
    assert f"{root / 'pyproject.toml'}: key 'history': 'accuracy/results/history.sqlite' is not a history URL" in err


def test_export_writes_the_history_with_cost_and_mde_and_refuses_bad_input(tmp_path, capsys) -> None:
    root = tmp_path / "results"
    write_results_folder(root, "c", 1, {REWARDS: 0.1}, cost={"device_seconds": 61.0, "basis": "cpu-seconds"},
                         mde={REWARDS: 0.04})
    assert main(["history", "ingest", str(root)]) == 0
    capsys.readouterr()
    out = tmp_path / "h.csv"
    assert main(["history", "export", "--results-dir", str(root), "--out", str(out)]) == 0
    assert capsys.readouterr().out == (f"history export: 2 row(s) of 1 run(s) (one per gate check, cost and MDE "
                                       f"beside) to {out}\n")
    header, *rows = out.read_text().splitlines()
    assert "device_seconds,cost_basis" in header and header.endswith(",mde")
    assert any(r.endswith(",0.04") and ",61.0,cpu-seconds," in r for r in rows)
    assert main(["history", "export", "--results-dir", str(root), "--out", str(out), "--case", "nope"]) == 2
    assert "no runs of case 'nope' in the history (cases: c)" in capsys.readouterr().err
    assert main(["history", "export", "--results-dir", str(root), "--out", str(tmp_path)]) == 2
    assert "is a folder; give a file path" in capsys.readouterr().err
