"""Adaptive replicates against fixed K: false alarms, power and runs per verdict, by simulation.

Synthetic curves with per-seed offsets and per-step noise (the shape of the embedded GRPO rewards), a pooled gate
calibrated from N = 5 runs at a 5% budget, then clean and shifted fresh runs judged (a) by one run, (b) by the mean
of K = 2 and 4 runs, (c) by the sequential design of ``autotest.judge.sequential`` (look 1 after one run, look 2
after K_max = 4). Usage: python benchmarks/bench_adaptive.py [--calibrations 20] [--verdicts 50]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.unit.judge.test_sequential import SPEC, _adaptive, _fixed, _run  # noqa: E402

from autotest.calibration.thresholds import calibrate  # noqa: E402
from autotest.judge.model import FAIL  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calibrations", type=int, default=20)
    parser.add_argument("--verdicts", type=int, default=50)
    parser.add_argument("--shifts", default="0,0.02,0.03,0.04")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    baselines = [calibrate(SPEC, [_run(rng) for _ in range(5)]).baseline for _ in range(args.calibrations)]
    print("| shift | design | fails | runs per verdict |")
    print("|---|---|---|---|")
    for shift in (float(s) for s in args.shifts.split(",")):
        rows = {"fixed K=1": [0, 0], "fixed K=2": [0, 0], "fixed K=4": [0, 0], "adaptive (1, then 4)": [0, 0]}
        for baseline in baselines:
            for _ in range(args.verdicts):
                for k in (1, 2, 4):
                    rows[f"fixed K={k}"][0] += _fixed(baseline, rng, -shift, k) == FAIL
                    rows[f"fixed K={k}"][1] += k
                status, used = _adaptive(baseline, rng, -shift)
                rows["adaptive (1, then 4)"][0] += status == FAIL
                rows["adaptive (1, then 4)"][1] += used
        total = args.calibrations * args.verdicts
        for name, (fails, runs) in rows.items():
            print(f"| {shift:g} | {name} | {fails / total:.1%} | {runs / total:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
