"""Start-up: the light commands import nothing heavy (issue 24, part 1).

Each command runs in a fresh interpreter, in-process through ``autotest.cli.main``, which then prints the
modules it loaded. ``--help``, ``compare --no-plots``, ``cases``, ``baseline promote`` and ``power`` must
load no SQLAlchemy, pandas, matplotlib, torch, Ray, MSProbe or SciPy, and ``--help`` and ``cases`` not the
judge, the calibration package or NumPy either. An import graph, not a timer: benchmarks/bench_startup.py
times them.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT
from tests import waits

HEAVY = ("sqlalchemy", "pandas", "matplotlib", "torch", "ray", "msprobe", "scipy")
#: the calibration package's modules (init_cli, the init command's shell, lives beside them and is light)
CALIBRATION = ("autotest.calibration.runs", "autotest.calibration.thresholds", "autotest.calibration.pooled_noise",
               "autotest.calibration.init", "autotest.calibration.promote", "autotest.calibration.proposals")
BASELINE = ROOT / "baselines" / "tiny-grpo.yaml"
PROBE = """
import contextlib, io, json, sys
from autotest.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}))
"""


def loaded(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str, set[str]]:
    """(exit code, what the command printed, the top-level names of every module it loaded)."""
    done = waits.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, limit_s=120,
                     cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    return probe["code"], probe["out"], set(probe["modules"])


def tiny_grpo_tracker(path: Path) -> Path:
    """A tiny-grpo tracker whose summary rows are the baseline's golden values (so compare passes)."""
    rows: dict[int, dict[str, float]] = defaultdict(dict)
    for metric, by_step in yaml.safe_load(BASELINE.read_text())["golden"]["table"].items():
        for step, value in by_step.items():
            rows[int(step)][metric] = value
    path.write_text("".join(json.dumps({**rows[s], "step": s}) + "\n" for s in sorted(rows)))
    return path


def heavy_in(modules: set[str], extra: tuple[str, ...] = ()) -> list[str]:
    return [name for name in (*HEAVY, *extra) if name in modules or any(m.startswith(name + ".") for m in modules)]


@pytest.mark.parametrize("argv", [["--help"], ["cases"], ["history", "--help"], ["init", "--help"]],
                         ids=" ".join)
def test_help_and_cases_load_neither_heavy_libraries_nor_the_judge(argv):
    code, out, modules = loaded(*argv)
    assert code == 0 and out.strip()
    assert heavy_in(modules, extra=("numpy", "autotest.judge", "autotest.pipeline",
                                    "autotest.history.store", *CALIBRATION)) == []
    if argv != ["cases"]:  # help reads no file: neither PyYAML nor the case reader
        assert heavy_in(modules, extra=("yaml", "autotest.inputs.case")) == []


def test_compare_without_plots_loads_no_heavy_library(tmp_path):
    tracker = tiny_grpo_tracker(tmp_path / "tracker.jsonl")
    code, out, modules = loaded("compare", "--baseline", str(BASELINE), "--current", str(tracker), "--no-plots")
    assert code == 0 and out.strip().splitlines()[-1].startswith("tiny-grpo: PASS"), out
    assert "autotest.judge.verdict" in modules  # it did judge
    assert heavy_in(modules, extra=CALIBRATION + ("autotest.pipeline", "autotest.history.store",
                                                      "autotest.report")) == []


def test_compare_writing_results_loads_sqlalchemy_only_to_record_the_verdict(tmp_path):
    tracker = tiny_grpo_tracker(tmp_path / "tracker.jsonl")
    argv = ("compare", "--baseline", str(BASELINE), "--current", str(tracker), "--no-plots")
    code, out, modules = loaded(*argv, "--out", str(tmp_path / "a"), "--no-history")
    assert code == 0 and (tmp_path / "a" / "report.md").is_file(), out
    assert heavy_in(modules) == []
    history = {"RL_AUTOTEST_HISTORY": f"sqlite:///{tmp_path / 'history.sqlite'}"}
    code, out, modules = loaded(*argv, "--out", str(tmp_path / "b"), env=history)
    assert code == 0 and (tmp_path / "history.sqlite").is_file(), out
    assert heavy_in(modules) == ["sqlalchemy"]


def test_baseline_promote_and_power_load_no_heavy_library(tmp_path):
    shutil.copyfile(BASELINE, tmp_path / "tiny-grpo.yaml")
    shutil.copyfile(BASELINE, tmp_path / "tiny-grpo.candidate.yaml")
    code, out, modules = loaded("baseline", "promote", "tiny-grpo", "--baselines-dir", str(tmp_path),
                                "--force", "the same file, promoted to load the command")
    assert code == 0 and f"promoted: {tmp_path / 'tiny-grpo.yaml'}" in out, out
    assert heavy_in(modules) == []
    code, out, modules = loaded("power", "tiny-grpo")
    assert code in (0, 1) and out.startswith("tiny-grpo: "), out
    assert heavy_in(modules) == []


def test_the_pytest_plugin_loads_only_option_parsing():
    """Every pytest session of an environment with rl-autotest installed loads the plugin (its entry point)."""
    probe = "import json, sys, autotest.plugin; print(json.dumps(sorted(sys.modules)))"
    done = waits.run([sys.executable, "-c", probe], capture_output=True, text=True, limit_s=120, cwd=ROOT,
                     env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    modules = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert heavy_in(modules, extra=("numpy", "yaml", "autotest.pipeline", "autotest.judge",
                                    "autotest.history", "autotest.inputs.case")) == []
