"""The baseline writer's header comment quotes user text (a case name, the calibrate command line with its paths):
a newline cannot end the comment and a control character cannot make the written file unloadable."""

from __future__ import annotations

from pathlib import Path

from autotest.inputs.baseline import load_baseline
from autotest.inputs.baseline_writer import baseline_yaml
from tests.helpers import DATA


def test_a_header_with_a_newline_and_an_escape_stays_one_comment_and_the_file_loads(tmp_path: Path) -> None:
    baseline = load_baseline(DATA / "baselines" / "scripted.yaml")
    header = "made by `rl-autotest calibrate c --results-dir '/tmp/x\nname: evil\x1b[2J'`"
    path = tmp_path / "scripted.yaml"
    path.write_text(baseline_yaml(baseline, header=header), encoding="utf-8")
    first, second = path.read_text(encoding="utf-8").splitlines()[:2]
    assert first == "# made by `rl-autotest calibrate c --results-dir '/tmp/x\\nname: evil\\x1b[2J'`"
    assert not second.startswith("name: evil")
    again = load_baseline(path)
    assert again.name == baseline.name and len(again.checks) == len(baseline.checks)
