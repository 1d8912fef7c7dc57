from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from autotest.calibration.review import render_report
from autotest.calibration.golden_shifts import golden_shifts
from autotest.calibration.thresholds import calibrate, leave_one_out
from autotest.inputs.baseline import load_baseline
from autotest.inputs.baseline_model import Baseline, CalibrationSpec, CheckSpec, StepPolicy
from autotest.inputs.baseline_writer import baseline_yaml
from autotest.judge.trace import Trace


def run(name: str, offset: float) -> Trace:
    series = {"loss": {s: 1.0 / s + offset for s in range(1, 11)},
              "acc": {s: 0.5 + offset for s in range(1, 11)},
              "eval/score": {0: 0.3 + offset, 10: 0.6 + offset}}
    return Trace(name, MappingProxyType({m: MappingProxyType(v) for m, v in series.items()}),
                 tuple(range(1, 11)), (0, 10))


SPEC = Baseline(
    name="full", path=Path("full.yaml"), description="every field", golden_table=MappingProxyType({}),
    checks=(CheckSpec("loss", "relative", "<", 0.1, scope="window", window=(3, 8), relative_floor=1e-6),
            CheckSpec("loss", "absolute", "<", 0.1),
            CheckSpec("acc", "absolute", "<=", 0.1, scope="percentile", percentile=90.0, severity="reference"),
            CheckSpec("eval/score", "absolute", "<", 0.1, scope="points", points=(0, 10)),
            CheckSpec("acc", "value", ">", 0.2, scope="final")),
    metric_aliases=MappingProxyType({"loss": "train/loss"}), short_names=MappingProxyType({"l": "loss"}),
    steps=StepPolicy(expected=10, exact=True), wall_time_max_s=600.0,
    calibration=CalibrationSpec(runs=4, margin=2.0, floors=MappingProxyType({"acc": 0.05}),
                                eval_set_size=MappingProxyType({"eval/score": 50})))


def test_candidate_yaml_reads_back_as_the_same_baseline(tmp_path):
    runs = [run("a", 0.0), run("b", 0.01), run("c", 0.02)]
    cal = calibrate(SPEC, runs)
    candidate = replace(cal.baseline, provenance={"produced_by": "rl-autotest calibrate", "seeds": [0, 1, 2]})
    path = tmp_path / "full.yaml"
    path.write_text(baseline_yaml(candidate, header="made by a test"))
    assert path.read_text().startswith("# made by a test\n")
    back = load_baseline(path)
    assert back.checks == candidate.checks
    assert back.calibration == candidate.calibration
    for field in ("name", "description", "metric_aliases", "short_names", "steps", "calibrated_range",
                  "wall_time_max_s", "provenance"):
        assert getattr(back, field) == getattr(candidate, field), field
    assert set(back.golden_table) == {"loss", "acc", "eval/score"}
    assert back.golden_table["eval/score"][10] == 0.61
    assert abs(back.golden_table["loss"][3] - (1 / 3 + 0.01)) < 1e-6  # 6 significant digits


def test_report_shows_thresholds_shift_self_check_and_next_step():
    runs = [run("a", 0.0), run("b", 0.01), run("c", 0.02)]
    cal = calibrate(SPEC, runs)
    prov = {"command": "rl-autotest calibrate full --runs 3", "date": "2026-11-30", "seeds": [0, 1, 2],
            "trackers": ["r/a.jsonl", "r/b.jsonl", "r/c.jsonl"], "results_dir": "results/full/calibration-1",
            "commit": {"sha": "abc123", "branch": "main", "dirty": False}}
    cal = replace(cal, baseline=replace(cal.baseline, provenance=prov))
    old = Trace("old", MappingProxyType({"acc": MappingProxyType({s: 0.4 for s in range(1, 11)})}))
    text = render_report(cal, leave_one_out(SPEC, runs), golden_shifts(old, cal.baseline), None, "",
                         ["N is small"], Path("b/full.candidate.yaml"), Path("b/full.yaml"),
                         "rl-autotest baseline promote full")
    assert "- commit under test: `abc123` (main, clean)" in text
    assert "## Warnings\n\n- N is small" in text
    assert "| `acc[final]` | value > | gate | - | - | - | 0.2 | 0.2 | kept: threshold kept: method 'value'" in text
    assert "| `eval/score[points]` | absolute < | gate | 0.02 (0.02, 0.01, 0.02) |" in text
    assert "binomial 2 x sqrt(p(1-p)/n), n=50" in text
    assert "| `acc` | 10 | 0.11 (step 1) | 0.11 |" in text
    assert "Each run checked against a baseline calibrated from the other 2" in text
    assert "| seed 2 | `r/c.jsonl` |" in text
    assert "Review this diff, then promote: `rl-autotest baseline promote full`" in text
    # every row of the thresholds table has its 9 cells: a '|' inside a cell is escaped
    rows = [line for line in text.splitlines() if line.startswith("| `") and "[" in line.split("|")[1]]
    assert len(rows) == 5 and all(len(re.findall(r"(?<!\\)\|", row)) == 10 for row in rows)
    assert "max \\|golden\\|" in text


def test_user_text_in_the_report_is_markdown_inert():
    """A branch, a path, a warning quoting a log and a tracker name are anyone's text: no heading, HTML or link."""
    runs = [run("a", 0.0), run("b", 0.01), run("c", 0.02)]
    cal = calibrate(SPEC, runs)
    prov = {"command": "rl-autotest calibrate full --results-dir '/tmp/a`b'", "date": "2026-11-30",
            "seeds": [0, 1, 2], "trackers": ["r/a.jsonl", "r/b|x.jsonl", "r/<img src=x>.jsonl"],
            "results_dir": "results\n# PASS", "commit": {"sha": "abc123", "branch": "<script>x</script>",
                                                        "dirty": False}}
    cal = replace(cal, baseline=replace(cal.baseline, provenance=prov))
    text = render_report(cal, leave_one_out(SPEC, runs), [], None, "", ["metric [x](http://evil) logged\n## FAIL"],
                         Path("b/full.candidate.yaml"), Path("b/full.yaml"), "rl-autotest baseline promote full")
    assert "<script>" not in text and "[x](http" not in text
    assert text.count("<img") == 1 and "| seed 2 | `r/<img src=x>.jsonl` |" in text  # in a code span: shown as text
    assert not any(line.startswith(("# PASS", "## FAIL")) for line in text.splitlines())
    assert "- command: ``rl-autotest calibrate full --results-dir '/tmp/a`b'`` on 2026-11-30" in text
    assert "| seed 1 | `r/b\\|x.jsonl` |" in text  # a '|' in a cell is escaped, inside its code span too
