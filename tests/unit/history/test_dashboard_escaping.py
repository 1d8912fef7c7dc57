"""The history dashboard renders what it ingested from results.json files (untrusted: any tool can write
one) as text: a case name, check id, hardware or commit with markup comes out escaped, never as a tag,
an attribute or a script."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from autotest.history.dashboard import write_dashboard
from autotest.history.store import HistoryStore, ingest
from tests.unit.history.builders import REWARDS, write_results_folder

SCRIPT = "<script>alert(1)</script>"
QUOTE = '" onmouseover="alert(2)'


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append(tag)
        self.attributes += attrs

    def handle_data(self, data) -> None:
        self.text.append(data)


def _hostile_results(root: Path) -> None:
    for night in (1, 2, 3):
        folder = write_results_folder(root, "evil", night, {REWARDS: 0.01 * night})
        data = json.loads((folder / "results.json").read_text())
        data["case"] = f"{SCRIPT}{QUOTE}"
        for check in data["results"]:
            if check["check_id"] == REWARDS:
                check["check_id"] = check["metric"] = f"m{SCRIPT}[percentile]"
        (folder / "results.json").write_text(json.dumps(data))
        pre = json.loads((folder / "preflight.json").read_text())
        pre["environment"]["gpu"]["models"] = [f"GPU{SCRIPT}"]
        (folder / "preflight.json").write_text(json.dumps(pre))


def test_markup_from_ingested_results_comes_out_escaped(tmp_path: Path) -> None:
    _hostile_results(tmp_path / "results")
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    ingest([tmp_path / "results"], url)
    with HistoryStore.open(url) as store:
        page = write_dashboard(store, tmp_path / "site").read_text(encoding="utf-8")
    parsed = _Page()
    parsed.feed(page)
    assert "script" not in parsed.tags
    assert not [name for name, _ in parsed.attributes if name.startswith("on")]
    text = "".join(parsed.text)
    assert f"{SCRIPT}{QUOTE}" in text  # the case heading, readable as the user wrote it
    assert f"GPU{SCRIPT}" in text
    assert ("data-case", f"{SCRIPT}{QUOTE}") in parsed.attributes  # one attribute value, not two attributes
    assert SCRIPT not in page and "&lt;script&gt;" in page
