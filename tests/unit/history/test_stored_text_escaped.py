"""Stored text (a check id, an image, a reason: anything a results.json or preflight.json held when ingested) reaches
the terminal and the dashboard escaped: a terminal escape is shown as ``\\x1b``, never written raw."""

from __future__ import annotations

import json
from pathlib import Path

from autotest.cli import main
from autotest.history.database import sqlite_url
from autotest.history.store import ingest
from tests.unit.history.builders import REWARDS, write_results_folder

ESC = "\x1b]0;owned\x07\x1b[2J"
HOSTILE_CHECK = f"m{ESC}[percentile]"


def _history(root: Path) -> None:
    for night in (1, 2, 3):
        folder = write_results_folder(root, "c", night, {REWARDS: 0.01 * night})
        data = json.loads((folder / "results.json").read_text())
        for check in data["results"]:
            if check["check_id"] == REWARDS:
                check["check_id"] = HOSTILE_CHECK
        (folder / "results.json").write_text(json.dumps(data))
    ingest([root], sqlite_url(root / "history.sqlite"))


def test_history_show_metric_escapes_a_recorded_check_id_in_its_header(tmp_path: Path, capsys) -> None:
    _history(tmp_path)
    assert main(["history", "show", "c", "--results-dir", str(tmp_path), "--metric", "response/rewards/mean"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert out.splitlines()[0].split()[-1] == "m\\x1b]0;owned\\x07\\x1b[2J[percentile]"
    assert main(["history", "show", "c", "--results-dir", str(tmp_path)]) == 0
    assert "\x1b" not in capsys.readouterr().out


def test_the_dashboard_holds_no_raw_control_character(tmp_path: Path, capsys) -> None:
    _history(tmp_path)
    assert main(["history", "dashboard", "--results-dir", str(tmp_path), "--out", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "\x1b" not in page and "\x07" not in page
    assert "m\\x1b]0;owned\\x07\\x1b[2J[percentile]" in page


def test_history_fleet_escapes_a_recorded_image(tmp_path: Path, capsys) -> None:
    for case in ("c1", "c2"):
        for night in range(1, 4):
            folder = write_results_folder(tmp_path, case, night, {REWARDS: 0.5 if night == 3 else 0.05})
            preflight = json.loads((folder / "preflight.json").read_text())
            preflight["environment"]["image"] = f"img:2{ESC}\nfleet finding 9: forged" if night == 3 else "img:1"
            (folder / "preflight.json").write_text(json.dumps(preflight))
    ingest([tmp_path], sqlite_url(tmp_path / "history.sqlite"))
    assert main(["history", "fleet", "--results-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "img:2\\x1b]0;owned\\x07\\x1b[2J\\nfleet finding 9" in out
    assert not any(line.startswith("fleet finding 9") for line in out.splitlines())  # no forged line
