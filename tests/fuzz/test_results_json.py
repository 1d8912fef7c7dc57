"""Fuzz ``history ingest``'s reader: a real results folder (the scripted run judged and published) whose
results.json is changed key by key or corrupted byte by byte, then ingested into a fresh SQLite history.

Property: the run is recorded, or one UsageError line naming results.json.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from autotest.judge.verdict import compare_paths
from autotest.report.publish import publish
from tests.fuzz.strategies import corrupted, json_text, mutated, scaled, scratch, verdict_or_one_line
from tests.fuzz.test_metric_logs import BASELINE, _lines, xtuner_rows

pytest.importorskip("sqlalchemy")


@pytest.fixture(scope="module")
def results_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results folder as ``rl-autotest compare --out`` leaves it (no plots: they add nothing read here)."""
    base = tmp_path_factory.mktemp("results")
    tracker = base / "tracker.jsonl"
    tracker.write_text(_lines(xtuner_rows()), encoding="utf-8")
    published = publish(compare_paths(BASELINE, tracker, fmt="xtuner"), base / "scripted" / "run-1", with_plots=False)
    return Path(published.report_md).parent


def ingest_copy(seed: Path, results_json: bytes) -> None:
    from autotest.history.store import ingest

    with scratch() as folder:
        run = Path(shutil.copytree(seed, folder / "scripted" / "run-1"))
        (run / "results.json").write_bytes(results_json)
        verdict_or_one_line(lambda: ingest([run], url=f"sqlite:///{folder / 'history.sqlite'}"), "results.json")


def test_the_seed_is_recorded(results_folder: Path) -> None:
    from autotest.history.store import ingest

    with scratch() as folder:
        outcome = ingest([results_folder], url=f"sqlite:///{folder / 'history.sqlite'}")
        assert len(outcome.recorded) == 1


@scaled(0.6)  # every example opens a new SQLite history
@given(data=st.data())
def test_results_json_structured(results_folder: Path, data: st.DataObject) -> None:
    doc = json.loads((results_folder / "results.json").read_text(encoding="utf-8"))
    for _ in range(data.draw(st.integers(1, 3))):
        doc = data.draw(mutated(doc))
    ingest_copy(results_folder, json_text(doc).encode("utf-8", "surrogatepass"))


@scaled(0.6)
@given(data=st.data())
def test_results_json_bytes(results_folder: Path, data: st.DataObject) -> None:
    ingest_copy(results_folder, data.draw(corrupted((results_folder / "results.json").read_bytes())))
