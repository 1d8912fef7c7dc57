"""``bench_compare.py --as-user``: the ``rl-autotest compare`` process beside xtuner's own checker, on one pair.

Kept beside bench_compare.py (which writes the pair); see its docstring for what is measured.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_compare import checked_names, write_inputs

ROOT = Path(__file__).resolve().parents[1]
TARGET_RATIO, TARGET_MB = 0.5, 150
CHECKER = Path("autotest") / "utils" / "check_metric.py"
#: runs xtuner's check_rl_result as its CI does (from its autotest/ folder); argv: xtuner autotest dir, the
#: assert_info JSON, baseline tracker, current tracker, "plot" or "no-plot" (its report function swapped for a
#: no-op in this driver's namespace: the reading and checking alone; the checkout is not touched)
XTUNER_DRIVER = """
import json, sys
sys.path.insert(0, sys.argv[1])
import utils.check_metric as checker
from utils.check_metric import check_rl_result
if sys.argv[5] == "no-plot":
    checker.publish_comparison_report = lambda *args, **kwargs: None
passed, message = check_rl_result("bench", sys.argv[3], sys.argv[4], json.loads(sys.argv[2]))
print(passed, message[:200])
sys.exit(0 if passed else 1)
"""


def rl_autotest() -> list[str]:
    script = Path(sys.executable).with_name("rl-autotest")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "autotest.cli"]


def before_env(env: dict[str, str], before: Path) -> dict[str, str]:
    """``env`` with ``before``'s harness first on the path (its own modules, the installed dependencies)."""
    if not (before / "autotest" / "cli").is_dir():
        raise SystemExit(f"--before {before}: no autotest/cli there; pass a checkout of the harness")
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, (str(before.resolve()), os.environ.get("PYTHONPATH"))))}


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """(wall seconds, peak RSS in MB, CPU seconds: user + system) of one fresh process, which must exit 0."""
    with tempfile.TemporaryFile("w+") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall_s = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            out.seek(0)
            raise SystemExit(f"{' '.join(argv[:3])}...: exit {proc.returncode}\n{out.read()[-2000:]}")
    return wall_s, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime



def xtuner_assert_info(metrics: int) -> dict:
    """The harness baseline's 12 checks in xtuner's terms: absolute error < 0.5; p80 where the harness checks a
    percentile (every fifth check, as bench_compare's SCOPES cycle), stepwise elsewhere."""
    checks = []
    for i, name in enumerate(checked_names(metrics)):
        check = {"metric": name, "threshold": 0.5, "method": "absolute", "operator": "<"}
        if i % 5 == 1:
            check["aggregate"] = 80
        checks.append(check)
    return {"check_metrics": checks}


def as_user(steps: int, metrics: int, runs: int, plots: bool, before: Path | None = None) -> int:
    env = {**os.environ, "MPLBACKEND": "Agg",
           "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    xtuner = os.environ.get("XTUNER_ROOT")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        baseline, tracker = write_inputs(folder, steps, metrics)
        golden = folder / "golden.jsonl"
        size_mb = tracker.stat().st_size / 1e6
        print(f"pair: {steps} steps x {metrics} metrics, {size_mb:.0f} MB each, 12 metrics checked; "
              f"median of {runs} fresh processes, load {os.getloadavg()[0]:.1f} at start")
        tools = {"rl-autotest compare --out --no-plots": [*rl_autotest(), "compare", "--baseline", str(baseline),
                                                          "--current", str(tracker), "--out", str(folder / "out"),
                                                          "--no-plots", "--no-history"],
                 "rl-autotest compare (verdict only)": [*rl_autotest(), "compare", "--baseline", str(baseline),
                                                        "--current", str(tracker)]}
        envs = {name: env for name in tools}
        if before is not None:
            for name in list(tools):
                tools[f"before: {name.removeprefix('rl-autotest ')}"] = tools[name]  # the same command, its code
                envs[f"before: {name.removeprefix('rl-autotest ')}"] = before_env(env, before)
        if plots:
            tools["rl-autotest compare --out (plots)"] = [*rl_autotest(), "compare", "--baseline", str(baseline),
                                                          "--current", str(tracker), "--out",
                                                          str(folder / "plotted"), "--no-history"]
        if xtuner:
            checker = Path(xtuner) / CHECKER
            if not checker.is_file():
                raise SystemExit(f"XTUNER_ROOT={xtuner}: no {CHECKER} there; point it at an xtuner checkout")
            driver = [sys.executable, "-c", XTUNER_DRIVER, str(checker.parents[1]),
                      json.dumps(xtuner_assert_info(metrics)), str(golden), str(tracker)]
            tools["xtuner check_rl_result (its PNG included)"] = [*driver, "plot"]
            tools["xtuner check_rl_result (read + checks only)"] = [*driver, "no-plot"]
        else:
            print("XTUNER_ROOT is not set: xtuner's checker not run; the harness alone (set XTUNER_ROOT to an "
                  "xtuner checkout for the side-by-side ratio)")
        figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in tools}
        for _ in range(runs):  # interleaved rounds: every tool sees the same load
            for name, argv in tools.items():
                figures[name].append(timed(argv, folder, envs.get(name, env)))
        print(f"load {os.getloadavg()[0]:.1f} at end")
        # CPU seconds beside the wall time: on a busy machine the wall time is mostly waiting for a core
        summary = {name: (statistics.median(w for w, _, _ in samples), max(p for _, p, _ in samples),
                          statistics.median(c for _, _, c in samples))
                   for name, samples in figures.items()}
        for name, (wall_s, peak_mb, cpu_s) in summary.items():
            print(f"  {name:44} {wall_s:6.2f} s wall, {cpu_s:5.2f} s CPU, peak RSS {peak_mb:4.0f} MB")
        for theirs, (xtuner_s, _, xtuner_cpu) in summary.items():
            if not theirs.startswith("xtuner"):
                continue
            for ours, (wall_s, peak_mb, cpu_s) in summary.items():
                if not ours.startswith("xtuner"):
                    met = wall_s <= TARGET_RATIO * xtuner_s and peak_mb <= TARGET_MB
                    print(f"  {ours} / {theirs}: {wall_s / xtuner_s:.2f} (CPU {cpu_s / xtuner_cpu:.2f}) "
                          f"(target <= {TARGET_RATIO}, <= {TARGET_MB} MB: {'met' if met else 'NOT met'})")
    return 0
