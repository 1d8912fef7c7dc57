"""results.json fields the fuzz suite (tests/fuzz/test_results_json.py) found reaching the database or the file
system unchecked: a check's text fields of another type are one line; a current_source that is no path is
no tracker, never an OSError."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.history.record import read_results_folder


def _folder(tmp_path: Path, **fields: object) -> Path:
    folder = tmp_path / "c" / "run-1"
    folder.mkdir(parents=True)
    check = {"check_id": "m[stepwise]", "status": "PASS", "metric": "m", "method": "absolute", "operator": "<",
             "scope": "stepwise", "observed": 0.1, "threshold": 0.5}
    data = {"schema_version": 1, "case": "c", "status": "PASS", "results": [{**check, **fields.pop("check", {})}],
            **fields}
    (folder / "results.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


@pytest.mark.parametrize(("key", "value", "kind"), [("metric", ["m"], "a list"), ("operator", 3, "a number"),
                                                    ("scope", {"a": 1}, "an object")])
def test_a_check_field_that_is_not_text_is_one_line(tmp_path: Path, key: str, value: object, kind: str) -> None:
    folder = _folder(tmp_path, check={key: value})
    with pytest.raises(UsageError, match=rf"^{re.escape(str(folder.resolve() / 'results.json'))}: key "
                                         rf"'results\[0\]\.{key}' is {kind}, not text \(or null\); "
                                         "the results folder is corrupt$"):
        read_results_folder(folder)


@pytest.mark.parametrize("source", [{"a": 1}, "x" * 5000])
def test_a_current_source_that_is_no_path_means_no_tracker(tmp_path: Path, source: object) -> None:
    record = read_results_folder(_folder(tmp_path, current_source=source))
    assert record.metrics == () and any("no tracker copy" in w for w in record.warnings)
