"""Time the embedded MOPD run end to end, by phase (target: a warm run well under 120 s on 2 cores).

    python benchmarks/bench_tiny_mopd.py [--runs 1] [--seed 0] [--cold] [--json]

Runs ``python -m autotest.workloads.mopd_launch`` as the case does and timestamps its output
lines as they arrive: fixture (cold: the teachers are trained into a fresh temp cache; warm:
the cache at $RL_AUTOTEST_CACHE or ~/.cache/rl-autotest), teacher servers up and answering,
training (25 steps + 6 evals; the tracker's summed ``time/step`` beside it) and shutdown. The
machine's load average is printed too: the CPUs may be shared.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 120.0
MARKS = {  # phase end -> the launcher line that marks it
    "fixture": "started teacher server",
    "teachers_ready": "all ",
    "training": "training exited",
    "shutdown": "stopped ",
}


def calibration_run(seed: int, cache: Path | None) -> dict[str, float]:
    env = dict(os.environ)
    if cache is not None:
        env["RL_AUTOTEST_CACHE"] = str(cache)
    with tempfile.TemporaryDirectory(prefix="bench-mopd-") as work:
        command = [sys.executable, "-m", "autotest.workloads.mopd_launch", "--work-dir", work, "--seed", str(seed)]
        start = time.perf_counter()
        seen: dict[str, float] = {}
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                              cwd=Path(__file__).resolve().parents[1]) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                for phase, mark in MARKS.items():
                    if phase not in seen and line.startswith("[mopd-launch] " + mark):
                        seen[phase] = time.perf_counter() - start
        total = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"launcher exited with code {proc.returncode}")
        tracker = glob.glob(f"{work}/*/logs/exp_tracking/tracker.jsonl")[0]
        step_time = sum(row.get("time/step", 0.0) for row in map(json.loads, Path(tracker).read_text().splitlines()))
    phases, last = {}, 0.0
    for phase in MARKS:
        phases[f"{phase}_s"] = round(seen[phase] - last, 2)
        last = seen[phase]
    return {"total_s": round(total, 2), **phases, "sum_time_step_s": round(step_time, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cold", action="store_true", help="train the teachers into a fresh temp cache first")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-mopd-cache-") as tmp_cache:
        for i in range(args.runs):
            # --cold: the first run trains the teachers into the empty temp cache, later runs reuse it
            results.append(calibration_run(args.seed, Path(tmp_cache) if args.cold else None))
    report = {"cpus": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()], "cold_first": args.cold,
              "target_s": TARGET_S, "runs": results}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for i, r in enumerate(results):
            label = "cold" if args.cold and i == 0 else "warm"
            print(f"run {i + 1} ({label}): total {r['total_s']} s = fixture {r['fixture_s']} + teachers up "
                  f"{r['teachers_ready_s']} + training {r['training_s']} (sum of time/step {r['sum_time_step_s']}) "
                  f"+ shutdown {r['shutdown_s']}")
        print(f"cpus {report['cpus']}, load average {report['loadavg']}; target: warm total < {TARGET_S:g} s")
    warm = [r["total_s"] for i, r in enumerate(results) if not (args.cold and i == 0)]
    return 0 if all(t < TARGET_S for t in warm) else 1


if __name__ == "__main__":
    sys.exit(main())
