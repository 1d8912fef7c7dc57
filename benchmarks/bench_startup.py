"""Start-up: how long a user waits for ``rl-autotest --help`` (target <= 0.25 s) and for a small
``compare --no-plots`` of a tiny-grpo tracker against its baseline (target <= 0.4 s).

    python benchmarks/bench_startup.py [--runs 7] [--against OTHER_CHECKOUT]

Each figure is the median wall time of N fresh processes of the installed ``rl-autotest`` script (else
``python -m autotest.cli``), start-up included, with its CPU time (user + sys, less sensitive to a loaded
machine) and the load average beside it; it asserts nothing. ``--against`` times another checkout of the
harness (e.g. the previous commit's worktree) in the same rounds, interleaved, for a before/after under the
same load. The
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


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one fresh process, which must exit 0."""
    with tempfile.TemporaryFile("w+") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall_s = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            out.seek(0)
            raise SystemExit(f"{' '.join(argv)}: exit {os.waitstatus_to_exitcode(status)}\n{out.read()[-2000:]}")
    return wall_s, usage.ru_utime + usage.ru_stime


def with_path(root: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(root), os.environ.get("PYTHONPATH"))))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per command (median taken)")
    parser.add_argument("--against", type=Path, help="another checkout of the harness to time in the same rounds")
    args = parser.parse_args()
    trees = {"this tree": with_path(ROOT), **({f"{args.against}": with_path(args.against)} if args.against else {})}
    cli = command()
    with tempfile.TemporaryDirectory() as tmp:
        tracker = tiny_grpo_tracker(Path(tmp) / "tracker.jsonl")
        commands = {"--help": [*cli, "--help"],
                    "compare --no-plots": [*cli, "compare", "--baseline", str(BASELINE), "--current", str(tracker),
                                           "--no-plots"]}
        bare = [timed([sys.executable, "-c", "pass"], trees["this tree"]) for _ in range(args.runs)]
        print(f"{Path(cli[0]).name}: median of {args.runs} fresh processes, load {os.getloadavg()[0]:.1f} at start "
              f"(a bare `python -c pass`: {statistics.median(w for w, _ in bare):.3f} s wall, "
              f"{statistics.median(c for _, c in bare):.3f} s CPU)")
        for name, argv in commands.items():
            samples: dict[str, list[tuple[float, float]]] = {tree: [] for tree in trees}
            for _ in range(args.runs):  # interleaved: both trees see the same load
                for tree, env in trees.items():
                    samples[tree].append(timed(argv, env))
            for tree, got in samples.items():
                wall_s = statistics.median(w for w, _ in got)
                cpu_s = statistics.median(c for _, c in got)
                met = "met" if wall_s <= TARGETS_S[name] else "NOT met"
                print(f"  {name:20} {tree:24} {wall_s:.3f} s wall, {cpu_s:.3f} s CPU, load {os.getloadavg()[0]:.1f}; "
                      f"target <= {TARGETS_S[name]} s wall: {met}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
