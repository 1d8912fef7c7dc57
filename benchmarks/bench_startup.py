"""Start-up: how long a user waits for ``rl-autotest --help`` (target <= 0.25 s) and for a small
``compare --no-plots`` of a tiny-grpo tracker against its baseline (target <= 0.4 s).

    python benchmarks/bench_startup.py [--runs 7]

Each figure is the median wall time of N fresh processes of the installed ``rl-autotest`` script (else
``python -m autotest.cli``), start-up included, with the load average beside it; it asserts nothing. The
tracker's summary rows are the committed baseline's golden values (45 steps, 7 metrics), so the verdict is
PASS and every check runs. tests/integration/test_cli_imports.py pins what these commands import.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "baselines" / "tiny-grpo.yaml"
TARGETS_S = {"--help": 0.25, "compare --no-plots": 0.4}


def command() -> list[str]:
    """The console script beside this interpreter (what a user runs), else the module."""
    script = Path(sys.executable).with_name("rl-autotest")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "autotest.cli"]


def tiny_grpo_tracker(path: Path) -> Path:
    rows: dict[int, dict[str, float]] = defaultdict(dict)
    for metric, by_step in yaml.safe_load(BASELINE.read_text())["golden"]["table"].items():
        for step, value in by_step.items():
            rows[int(step)][metric] = value
    path.write_text("".join(json.dumps({**rows[s], "step": s}) + "\n" for s in sorted(rows)))
    return path


def median_wall_s(argv: list[str], runs: int, env: dict[str, str]) -> tuple[float, float]:
    """(median, max) wall seconds of ``runs`` fresh processes; each must exit 0."""
    walls = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
        walls.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}\n{done.stdout}{done.stderr}")
    return statistics.median(walls), max(walls)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per command (median taken)")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    cli = command()
    with tempfile.TemporaryDirectory() as tmp:
        tracker = tiny_grpo_tracker(Path(tmp) / "tracker.jsonl")
        commands = {"--help": [*cli, "--help"],
                    "compare --no-plots": [*cli, "compare", "--baseline", str(BASELINE), "--current", str(tracker),
                                           "--no-plots"]}
        baseline_s, _ = median_wall_s([sys.executable, "-c", "pass"], args.runs, env)
        print(f"{Path(cli[0]).name}: median of {args.runs} fresh processes "
              f"(a bare `python -c pass`: {baseline_s:.3f} s)")
        for name, argv in commands.items():
            load = os.getloadavg()[0]
            median_s, worst_s = median_wall_s(argv, args.runs, env)
            met = "met" if median_s <= TARGETS_S[name] else "NOT met"
            print(f"  {name:20} {median_s:.3f} s (max {worst_s:.3f} s) at load {load:.1f}; "
                  f"target <= {TARGETS_S[name]} s: {met}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
