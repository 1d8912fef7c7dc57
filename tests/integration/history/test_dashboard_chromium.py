"""The dashboard in a real headless Chromium: renders without console errors, every case's plots shown."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from autotest.history.dashboard import write_dashboard
from autotest.history.fleet import FleetParams, triage
from autotest.history.fleet_store import record_fleet_findings
from autotest.history.store import BisectFinding, HistoryStore, ingest
from tests.integration.history.browser import Browser, find_chromium
from tests.unit.history.builders import FLEET_CASES, fleet, write_nightlies, write_replicated_nightlies

CASES_JS = """[...document.querySelectorAll('section.case')].map(s => ({
  case: s.dataset.case,
  plots: [...s.querySelectorAll('svg.trend')].filter(g => g.getBoundingClientRect().width > 100).length,
  points: s.querySelectorAll('svg.trend a[href] circle').length,
  changes: s.querySelectorAll('svg.trend line.change').length,
  culprits: s.querySelectorAll('svg.trend line.culprit').length + s.querySelectorAll('div.culprit a[href]').length,
  drift: s.querySelectorAll('.drift').length,
  verdicts: s.querySelectorAll('table.verdicts tr').length - 1}))"""


def _night_sha(night: int) -> str:  # the framework commit tests.unit.history.builders gives a night
    return hashlib.sha1(f"night {night}".encode()).hexdigest()


@pytest.fixture(scope="module")
def chromium() -> str:
    found = find_chromium()
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium not found (apt-get install chromium); CI must run the dashboard test")
        pytest.skip("chromium not found (apt-get install chromium)")
    return found


def test_dashboard_renders_every_case_without_console_errors(tmp_path, history_url, chromium) -> None:
    results = tmp_path / "results"
    write_nightlies(results, "grpo-nightly", nights=40, shift_at=25, seed=11)
    write_nightlies(results, "mopd-nightly", nights=12, seed=12)
    ingest([results], history_url)
    with HistoryStore.open(history_url) as store:  # a nightly bisect named the commit between nights 24 and 25
        store.add_finding(BisectFinding("grpo-nightly", _night_sha(24), _night_sha(25), "c" * 40,
                                        "optimiser: new default learning rate", "dev", "high", str(tmp_path / "b")))
        page = write_dashboard(store, tmp_path / "dashboard")
    with Browser(chromium) as browser:
        browser.load(page)
        cases = browser.evaluate(CASES_JS)
        errors = browser.errors()
        screenshot = browser.screenshot(tmp_path / "dashboard.png")
    assert errors == []
    assert cases == [
        {"case": "grpo-nightly", "plots": 2, "points": 80, "changes": 1, "culprits": 3, "drift": 1, "verdicts": 10},
        {"case": "mopd-nightly", "plots": 2, "points": 24, "changes": 0, "culprits": 0, "drift": 0, "verdicts": 10}]
    assert screenshot.stat().st_size > 10_000
    if os.environ.get("RL_AUTOTEST_DASHBOARD_SCREENSHOT"):  # how docs/history-dashboard.png is made
        Path(os.environ["RL_AUTOTEST_DASHBOARD_SCREENSHOT"]).write_bytes(screenshot.read_bytes())


def test_each_point_links_to_its_results_folder(tmp_path, chromium) -> None:
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    folders = write_nightlies(tmp_path / "results", "one", nights=3, seed=1)
    ingest([tmp_path / "results"], url)
    with HistoryStore.open(url) as store:
        page = write_dashboard(store, tmp_path / "site")
    with Browser(chromium) as browser:
        browser.load(page)
        hrefs = browser.evaluate(
            "[...document.querySelectorAll('svg.trend a')].map(a => new URL(a.href.baseVal, document.baseURI).href)")
        assert browser.errors() == []
    reports = [(f / "report.md").as_uri() for f in folders]
    assert hrefs == reports + reports  # two statistics, three runs each, oldest first


def test_the_browser_check_sees_console_errors_and_broken_resources(tmp_path, chromium) -> None:
    page = tmp_path / "broken.html"
    page.write_text('<!doctype html><img src="missing.png"><script>console.error("boom")</script>', encoding="utf-8")
    with Browser(chromium) as browser:
        browser.load(page)
        errors = browser.errors()
    assert any("boom" in e for e in errors)
    assert any("missing.png" in e or "ERR_FILE_NOT_FOUND" in e for e in errors), errors


FLEET_JS = """({
  banners: [...document.querySelectorAll('div.fleet')].map(b => ({
    cases: b.dataset.cases.split(' '), links: b.querySelectorAll('a[href^="#case-"]').length,
    text: b.textContent})),
  causes: [...document.querySelectorAll('section.case')].filter(s => s.querySelector('.fleet-cause a[href^="#fleet-"]'))
    .map(s => s.dataset.case),
  noise: [...document.querySelectorAll('section.case')].map(s => [s.dataset.case,
    s.querySelectorAll('.drift.noise').length]).filter(([, n]) => n > 0),
  visible: [...document.querySelectorAll('div.fleet')].every(b => b.getBoundingClientRect().height > 10)})"""


def test_one_fleet_banner_across_the_cases_it_explains_and_noise_lines_shown(tmp_path, chromium) -> None:
    root = tmp_path / "results"
    url = fleet(root, shift=1.0, torch_at=31)  # torch moved on night 31 in every case: every case FAILs from there
    write_replicated_nightlies(tmp_path / "noisy")  # a ninth case whose replicates agree less from night 25
    ingest([tmp_path / "noisy" / "c"], url)
    with HistoryStore.open(url) as store:
        record_fleet_findings(store, triage(store, params=FleetParams(nights=10)))  # the change was 10 nights ago
        page = write_dashboard(store, tmp_path / "dashboard")
    with Browser(chromium) as browser:
        browser.load(page)
        seen = browser.evaluate(FLEET_JS)
        assert browser.errors() == []
    [banner] = seen["banners"]
    assert sorted(banner["cases"]) == sorted(FLEET_CASES) and banner["links"] == len(FLEET_CASES)
    assert "environment changed" in banner["text"] and "torch" in banner["text"] and seen["visible"]
    assert sorted(seen["causes"]) == sorted(FLEET_CASES)  # "c", the noisy case, is not part of it
    assert ["c", 1] in seen["noise"]
