"""consistency_request.json: relative paths resolve against its folder; old absolute ones still read."""

from __future__ import annotations

import json
from pathlib import Path

from autotest.consistency.job import REQUEST_FILE, load_request, request_case


def _write(folder: Path, **paths: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    request = {"case": "tiny-grpo", "case_file": "autotest/cases/tiny-grpo.yaml", "breaches": [], **paths}
    (folder / REQUEST_FILE).write_text(json.dumps(request))
    return folder


def test_relative_paths_are_the_request_folders(tmp_path: Path) -> None:
    folder = _write(tmp_path / "r", results_dir=".", tracker="tracker.jsonl", work_dir="work", run_config="run_config")
    request = load_request(folder)
    assert request["results_dir"] == str(folder.resolve())
    assert request["tracker"] == str(folder.resolve() / "tracker.jsonl")
    assert request["work_dir"] == str(folder.resolve() / "work")
    assert request_case(request).name == "tiny-grpo"


def test_schema_1_absolute_paths_are_kept(tmp_path: Path) -> None:
    folder = _write(tmp_path / "r", results_dir="/elsewhere/r", tracker="/elsewhere/r/tracker.jsonl")
    request = load_request(folder)
    assert (request["results_dir"], request["tracker"]) == ("/elsewhere/r", "/elsewhere/r/tracker.jsonl")


def test_a_case_file_from_another_checkout_falls_back_to_the_case_name(tmp_path: Path) -> None:
    request = {"case": "tiny-grpo", "case_file": "/runner-a/rl-autotest/autotest/cases/tiny-grpo.yaml"}
    assert request_case(request).name == "tiny-grpo"
