"""Time the embedded GRPO run end to end (target: 45 steps under 60 s wall on 2 cores).

    python benchmarks/bench_tiny_grpo.py [--runs 1] [--seed 0] [--ray] [--rollout-dtype fp32|bf16] [--json]

Runs ``python -m autotest.workloads.grpo`` as the harness does, in a temp work dir, and prints
the wall time (process start to exit, imports included), the summed ``time/step`` from the
tracker, and whether it learned (rewards at steps 1 and 45, eval accuracy at 0/15/30/45).
The machine's load average is printed too: the CPUs may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def calibration_run(seed: int, extra: list[str]) -> dict[str, object]:
    """One full run; returns its timings and learning summary."""
    with tempfile.TemporaryDirectory(prefix="bench-grpo-") as tmp:
        cmd = [sys.executable, "-m", "autotest.workloads.grpo", "--work-dir", tmp, "--seed", str(seed), *extra]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        wall_s = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"run failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
        exp = sorted(p for p in Path(tmp).iterdir() if p.is_dir())[-1]
        rows = [json.loads(line) for line in (exp / "logs/exp_tracking/tracker.jsonl").read_text().splitlines()]
    summaries = {r["step"]: r for r in rows if "response/rewards/mean" in r}
    return {
        "wall_s": round(wall_s, 2),
        "sum_time_step_s": round(sum(r["time/step"] for r in summaries.values()), 2),
        "steps": len(summaries),
        "rewards_step1": round(summaries[1]["response/rewards/mean"], 3),
        "rewards_last": round(summaries[max(summaries)]["response/rewards/mean"], 3),
        "eval": {r["step"]: round(r["eval/accuracy"], 3) for r in rows if "eval/accuracy" in r},
        "max_k3": max(r["mismatch/mismatch_k3_kl"] for r in summaries.values()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ray", action="store_true")
    parser.add_argument("--rollout-dtype", default="fp32")
    parser.add_argument("--json", action="store_true", help="print one JSON object per run")
    args = parser.parse_args()
    extra = ["--rollout-dtype", args.rollout_dtype] + (["--ray"] if args.ray else [])
    print(f"load average: {os.getloadavg()}, cpus: {os.cpu_count()}", file=sys.stderr)
    for i in range(args.runs):
        result = calibration_run(args.seed + i, extra)
        if args.json:
            print(json.dumps(result))
        else:
            print(
                f"seed {args.seed + i}: wall {result['wall_s']} s (sum time/step {result['sum_time_step_s']} s), "
                f"{result['steps']} steps, rewards {result['rewards_step1']} -> {result['rewards_last']}, "
                f"eval {result['eval']}, max k3 {result['max_k3']:.2e}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
