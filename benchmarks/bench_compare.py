"""Time compare + report on a synthetic tracker of 5,000 steps x 300 metrics (target <= 0.6 s, <= 150 MB peak).

    python benchmarks/bench_compare.py [--steps 5000] [--metrics 300] [--check-all] [--plots]
    XTUNER_ROOT=/path/to/xtuner python benchmarks/bench_compare.py --as-user [--runs 3] [--before DIR]

``--as-user`` times what a user waits for: the ``rl-autotest compare`` process, start-up included, side by side
in one run with xtuner's own checker (``check_rl_result`` in ``$XTUNER_ROOT/autotest/utils/check_metric.py``,
run from that checkout as xtuner's CI runs it: it reads both logs, checks, and draws its one comparison PNG)
on the same pair and the same 12 metrics (its ``aggregate: 80`` where the harness checks a percentile,
stepwise elsewhere). It prints each tool's median wall time, CPU time and peak RSS (each a fresh process) and the
ratio (target: the harness at <= 0.5 x xtuner's time, <= 150 MB). Without ``XTUNER_ROOT`` it says so and
times the harness alone. xtuner's code is read from the checkout at run time, never copied here.
``--before DIR`` also times the harness of another checkout (DIR holds its ``autotest/``, e.g. ``git worktree add
DIR main``) in the same interleaved rounds: a change's before and after, side by side under one load.

The golden values are a reference tracker of the same shape (as the GRPO baseline is), so two
5,000 x 300 logs (about 60 MB each) are read. By default 12 metrics are checked with every scope
(as a real baseline does); ``--check-all`` checks all 300 stepwise (1.5 M compared points, the
worst case). It reports wall and CPU time and the process's peak RSS (ru_maxrss, which includes
writing the inputs; that part stays small); it asserts nothing. On a shared machine, run it a few
times and take the median.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

SCOPES = ("scope: stepwise", "scope: percentile, percentile: 80", "scope: final",
          "scope: window, window: [100, 4000]", "scope: points, points: [1, 1000, 2500, 5000]")


#: xtuner's RL step-summary marker (its checker reads only rows that have it) and other real names, first
REAL_NAMES = ("response/rewards/mean", "response/response_len/mean", "mismatch/mismatch_k3_kl", "entropy/mean")


def metric_names(metrics: int) -> list[str]:
    return [*REAL_NAMES, *(f"group{m % 10}/metric_{m}" for m in range(len(REAL_NAMES), metrics))][:metrics]


def checked_names(metrics: int, check_all: bool = False) -> list[str]:
    names = metric_names(metrics)
    return names if check_all else names[:: max(1, metrics // 12)][:12]


def write_inputs(folder: Path, steps: int, metrics: int, check_all: bool = False) -> tuple[Path, Path]:
    rng = random.Random(0)
    names = metric_names(metrics)
    tracker = folder / "tracker.jsonl"
    with tracker.open("w") as handle:
        for step in range(1, steps + 1):
            row = {name: rng.random() for name in names}
            row["step"] = step
            handle.write(json.dumps(row) + "\n")
    golden = folder / "golden.jsonl"
    shutil.copyfile(tracker, golden)  # not through memory: the peak RSS is the comparison's
    checked = checked_names(metrics, check_all)
    checks = "\n".join(f"  - {{metric: {n}, method: absolute, operator: '<', threshold: 0.5, "
                       f"{'scope: stepwise' if check_all else SCOPES[i % len(SCOPES)]}}}"
                       for i, n in enumerate(checked))
    baseline = folder / "baseline.yaml"
    baseline.write_text(f"name: bench\ngolden: {{tracker: {golden}}}\nsteps: {{expected: {steps}, exact: true}}\n"
                        f"checks:\n{checks}\n")
    return baseline, tracker


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--metrics", type=int, default=300)
    parser.add_argument("--check-all", action="store_true", help="check every metric stepwise")
    parser.add_argument("--plots", action="store_true")
    parser.add_argument("--as-user", action="store_true",
                        help="time the rl-autotest process beside xtuner's checker ($XTUNER_ROOT)")
    parser.add_argument("--runs", type=int, default=3, help="with --as-user: fresh processes per tool (median)")
    parser.add_argument("--before", type=Path, help="with --as-user: also time the harness of this checkout")
    args = parser.parse_args()
    if args.as_user:
        from bench_compare_cli import as_user

        return as_user(args.steps, args.metrics, args.runs, args.plots, args.before)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        baseline, tracker = write_inputs(folder, args.steps, args.metrics, args.check_all)
        start = time.perf_counter()
        start_cpu = time.process_time()
        from autotest.judge.verdict import compare_paths
        from autotest.report.publish import publish

        comparison = compare_paths(baseline, tracker)
        publish(comparison, folder / "out", with_plots=args.plots)
        elapsed = time.perf_counter() - start
        elapsed_cpu = time.process_time() - start_cpu
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    checked = args.metrics if args.check_all else min(12, args.metrics)
    print(f"compare+report {args.steps} steps x {args.metrics} metrics, {checked} checked (plots={args.plots}): "
          f"{elapsed:.2f} s wall ({elapsed_cpu:.2f} s CPU), peak RSS {peak_mb:.0f} MB, "
          f"verdict {comparison.verdict.status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
