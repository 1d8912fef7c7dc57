"""The dashboard's costs: per case and night (a table above the cases), per night within a case beside the MDEs
its latest run reached, and per run in the verdicts table."""

from __future__ import annotations

import re

from autotest.history.dashboard import write_dashboard
from autotest.history.database import sqlite_url
from autotest.history.store import HistoryStore, ingest
from tests.unit.history.builders import REWARDS, write_results_folder


def _table(page: str, css: str) -> list[list[str]]:
    body = re.search(rf'<table class="{css}">(.*?)</table>', page, re.S).group(1)
    return [re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row) for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body)]


def test_cost_per_case_and_night_beside_the_mde(tmp_path) -> None:
    root = tmp_path / "results"
    gpu = {"device_seconds": 800.0, "basis": "gpu-seconds"}
    write_results_folder(root, "a", 1, {REWARDS: 0.1}, cost=gpu, mde={REWARDS: 0.05})
    write_results_folder(root / "retry", "a", 1, {REWARDS: 0.1}, cost={**gpu, "device_seconds": 400.0},
                         mde={REWARDS: 0.0412}, sha="f" * 40)  # a second run the same night
    write_results_folder(root, "b", 2, {REWARDS: 0.1}, cost={"device_seconds": 61.0, "basis": "cpu-seconds"})
    write_results_folder(root, "b", 3, {REWARDS: 0.1})  # no cost recorded
    ingest([root])
    with HistoryStore.open(sqlite_url(root / "history.sqlite"), read_only=True) as store:
        page = write_dashboard(store, tmp_path / "dash").read_text(encoding="utf-8")
    assert _table(page, "costs") == [["night (UTC)", "a", "b", "total"],
                                     ["2026-01-04", "", "-", "-"],
                                     ["2026-01-03", "", "61.0 CPU-s", "61.0 CPU-s"],
                                     ["2026-01-02", "1200.0 GPU-s", "", "1200.0 GPU-s"]]
    nights = _table(page.split('id="case-a"')[1], "night-costs")
    assert nights[1] == ["2026-01-02", "2", "1200.0 GPU-s", f"{REWARDS} ±0.0412"]  # the latest run's MDE
    verdicts = _table(page.split('id="case-b"')[1], "verdicts")
    assert verdicts[0][7] == "cost" and [r[7] for r in verdicts[1:]] == ["-", "61.0 CPU-s"]
