"""Time to verdict under --fail-fast, as a fraction of a full run (tiny-grpo, a never-synced layer).

    python benchmarks/bench_time_to_verdict.py [--fault unsynced-layer] [--seed 0] [--faulty-to-end]

Runs the clean case to its end (the reference wall time), then the faulty case with fail-fast,
both through the one pipeline, and prints the first breached step, the step at which the run
was stopped and the time from launch to the decided FAIL. ``--faulty-to-end`` also runs the faulty
case without fail-fast: the reference for a fault that slows the run itself (``slow-step``).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from autotest.inputs.case import load_case
from autotest.pipeline import JudgeOptions, LaunchOptions, PublishOptions, RunOptions, run_case


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fault", default="unsynced-layer")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--faulty-to-end", action="store_true", help="also time the faulty run without fail-fast")
    args = parser.parse_args()
    case = load_case("tiny-grpo")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.monotonic()
        no_plots = PublishOptions(with_plots=False)
        clean = run_case(case, RunOptions(LaunchOptions(results_root=root, seed=args.seed), publish=no_plots))
        full_s = time.monotonic() - t0
        t0 = time.monotonic()
        faulty = run_case(case, RunOptions(LaunchOptions(results_root=root, seed=args.seed, fault=args.fault),
                                           JudgeOptions(fail_fast=True), no_plots))
        stopped_s = time.monotonic() - t0
        if args.faulty_to_end:
            t0 = time.monotonic()
            whole = run_case(case, RunOptions(LaunchOptions(results_root=root, seed=args.seed, fault=args.fault),
                                              publish=no_plots))
            whole_s = time.monotonic() - t0
    assert faulty.verdict is not None
    ttv = faulty.verdict.context.get("time_to_verdict_s")
    completion = next(r for r in faulty.verdict.results if r.check_id == "run[completion]")
    first = next((r.first_breach_step for r in faulty.verdict.results if r.first_breach_step is not None), None)
    print(f"clean run: {clean.status} in {full_s:.1f} s (45 steps)")
    print(f"{args.fault} with --fail-fast: {faulty.status} in {stopped_s:.1f} s; first breach at step {first}; "
          f"{completion.message.split(':')[0]}")
    if ttv is not None:
        print(f"time to verdict: {ttv:.1f} s = {ttv / full_s:.0%} of a full run")
    if args.faulty_to_end:
        print(f"{args.fault} to the end: {whole.status} in {whole_s:.1f} s; with --fail-fast {stopped_s / whole_s:.0%} "
              "of it")


if __name__ == "__main__":
    main()
