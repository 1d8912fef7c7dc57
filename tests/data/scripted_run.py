"""A scripted stand-in for a training run: writes an xtuner tracker step by step, and misbehaves on request.

A real process with a real metric log, for testing the runner, follower and plugin in seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--step-s", type=float, default=0.0)
    parser.add_argument("--fault", default="")
    args = parser.parse_args()
    name, _, arg = args.fault.partition(":")
    print(f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')}", flush=True)
    print(f"started {time.time()}", flush=True)
    exp = Path(args.work_dir) / time.strftime("%Y%m%d%H%M%S") / "logs" / "exp_tracking"
    exp.mkdir(parents=True, exist_ok=True)
    (exp.parent.parent / "config.json").write_text(json.dumps({"seed": args.seed, "recompute_logprobs": True}))
    if name == "infra-once":
        marker = Path(args.work_dir).parent / "infra-fault-injected"
        if not marker.exists():
            marker.write_text("1")
            print("OSError: [Errno 98] Address already in use", file=sys.stderr)
            return 1
    if name == "spawn-grandchild":
        import subprocess

        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    tracker = (exp / "tracker.jsonl").open("a")
    tracker.write(json.dumps({"eval/accuracy": 0.5, "step": 0}) + "\n")
    for step in range(1, args.steps + 1):
        if name == "crash-at" and step == int(arg):
            raise SystemExit(3)
        if name == "server-dies-at" and step == int(arg):  # what the MOPD launcher says when a teacher dies
            print("ERROR: teacher server digit_sum_teacher-0 died (killed by SIGKILL) during training",
                  file=sys.stderr, flush=True)
            raise SystemExit(1)
        if name == "hang-at" and step == int(arg):
            time.sleep(3600)
        if name == "truncate-at" and step == int(arg):
            tracker.write('{"response/rewards/mean": 0.')
            tracker.flush()
            return 0
        step_time = 0.1
        if name == "busy-step":  # CPU_S of work per step, then SLEEP_S asleep ("busy-step:0.3+1.0"): a timed step
            started, (work, _, nap) = time.perf_counter(), arg.partition("+")
            spent = time.thread_time() + float(work)
            while time.thread_time() < spent:
                pass
            time.sleep(float(nap or 0))
            step_time = time.perf_counter() - started
        noise = 0.001 * math.sin(step + args.seed)
        row = {"response/rewards/mean": 0.1 + 0.02 * step + noise,
               "mismatch/mismatch_k3_kl": 1e-14 if not (name == "mismatch-from" and step >= int(arg)) else 1e-2,
               "time/step": step_time}
        if name == "reward-offset":  # a shifted reward curve, e.g. one replicate's seed off by more than its gate
            row["response/rewards/mean"] += float(arg)
        if name == "nan-at" and step >= int(arg):
            row["response/rewards/mean"] = float("nan")
        tracker.write(json.dumps({"train_metrics/worker_0/loss": 0.5, "step": step}) + "\n")
        if step == args.steps:
            row["eval/accuracy"] = 0.9 + noise
        tracker.write(json.dumps({**row, "step": step}) + "\n")
        tracker.flush()
        os.fsync(tracker.fileno())
        time.sleep(args.step_s)
    print(f"ended {time.time()}", flush=True)
    if name == "fill-disk":  # the run's disk fills up after its last step (tests/integration/pipeline/test_full_disk.py)
        from disk_filling import fill_disk

        fill_disk(Path(args.work_dir), arg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
