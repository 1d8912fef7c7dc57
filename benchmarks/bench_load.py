"""Verdicts on a busy runner: clean seeds and the slow-step fault of tiny-grpo, without load and under load.

    python benchmarks/bench_load.py [--seeds 11 12] [--burners-per-core 0 4] [--fault slow-step]

The benchmark keeps the machine busy with its own CPU burners: each a pure-Python loop in a session of its own
(with the kernel's autogroup scheduling, busy processes that share one session barely slow a run the harness
starts in a new session; in their own sessions they compete as a neighbour's jobs do), each bounded in time, all
stopped when a level ends. At every level it runs each clean seed and the fault through the one pipeline, with
the contention relaunch turned off (the raw outcome of each run is what is counted), and prints per run the
verdict, the time/step gate's status, the run's wait share and the load, then per level the false alarms (a clean
run FAIL), the environment outcomes, the detections (the fault FAIL) and whether the accuracy verdicts equal
those without load. Beside each, the same gate on the logged step times (its ``raw_observed`` against the
threshold): what the gate did before it knew the machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from autotest.inputs.case import load_case
from autotest.pipeline import JudgeOptions, LaunchOptions, PublishOptions, RunOptions, run_case
from autotest.run.infra import DEFAULT_POLICY, InfraKind, KindPolicy, RetryPolicy

#: a burner stops on its own after this long, whatever happens to the benchmark
BURNER_LIMIT_S = 1800
_BURN = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n"
NO_CONTENTION_RELAUNCH = RetryPolicy({**DEFAULT_POLICY.per_kind, InfraKind.CONTENTION: KindPolicy(0, 0)},
                                     DEFAULT_POLICY.max_total_relaunches)


def start_burners(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", _BURN.format(limit=BURNER_LIMIT_S)], start_new_session=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(count)]


def stop_burners(burners: list[subprocess.Popen]) -> None:
    for proc in burners:
        proc.kill()
    for proc in burners:
        proc.wait()


def _gate(verdict, prefix: str = "time/step"):
    return next((r for r in verdict.results if r.check_id.startswith(prefix)), None)


def _accuracy(verdict) -> tuple[tuple[str, str], ...]:
    """Each accuracy gate's status (every metric gate that is not a performance or memory one)."""
    return tuple((r.check_id, r.status) for r in verdict.results
                 if r.kind == "metric" and r.severity == "gate"
                 and verdict.metric_roles.get(r.metric or "") not in ("step_time", "throughput", "memory"))


def _raw_status(gate) -> str:
    """The time/step gate's status on the logged step times, as the gate decided before it knew the machine."""
    raw = (gate.parameters.get("machine") or {}).get("raw_observed") if gate else None
    if raw is None or gate.threshold is None:
        return "-"
    return "PASS" if raw < gate.threshold else "FAIL"


def run_level(case, root: Path, burners_per_core: int, seeds: list[int], fault: str) -> dict:
    cores = os.cpu_count() or 1
    burners = start_burners(burners_per_core * cores)
    rows, accuracy = [], {}
    try:
        for seed, injected in [(seed, None) for seed in seeds] + [(seeds[0], fault)]:
            options = RunOptions(LaunchOptions(results_root=root, seed=seed, fault=injected,
                                               retry_policy=NO_CONTENTION_RELAUNCH),
                                 JudgeOptions(fail_fast=injected is not None), PublishOptions(with_plots=False))
            verdict = run_case(case, options).verdict
            gate = _gate(verdict)
            during = verdict.context.get("machine", {}).get("during", {})
            rows.append({"seed": seed, "fault": injected or "-", "verdict": verdict.status,
                         "environment": verdict.environment_only, "gate": gate.status if gate else "-",
                         "raw": _raw_status(gate), "gate_message": gate.message if gate else "",
                         "wait_share": during.get("run_delay_share"), "load": during.get("load_per_core_mean")})
            if injected is None:
                accuracy[seed] = _accuracy(verdict)
    finally:
        stop_burners(burners)
    return {"burners_per_core": burners_per_core, "rows": rows, "accuracy": accuracy}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[11, 12])
    parser.add_argument("--burners-per-core", type=int, nargs="+", default=[0, 4])
    parser.add_argument("--fault", default="slow-step")
    args = parser.parse_args()
    case = load_case("tiny-grpo")
    levels = []
    with tempfile.TemporaryDirectory() as tmp:
        for level in args.burners_per_core:
            levels.append(run_level(case, Path(tmp), level, args.seeds, args.fault))
            for row in levels[-1]["rows"]:
                share = "-" if row["wait_share"] is None else f"{row['wait_share']:.0%}"
                load = "-" if row["load"] is None else f"{row['load']:.2f}"
                print(f"{level} burners/core  seed {row['seed']:>3}  {row['fault']:<10} {row['verdict']:<5}"
                      f"{' (environment)' if row['environment'] else '':<14} time/step {row['gate']:<5} "
                      f"(raw {row['raw']:<4}) wait {share:>4}  load/core {load:>5}  {row['gate_message'][:160]}",
                      flush=True)
    quiet = levels[0]["accuracy"]
    print()
    print("| burners per core | clean: FAIL | clean: environment | clean: PASS | clean: FAIL on raw step time | "
          "fault FAIL | accuracy verdicts as without load |")
    print("|---|---|---|---|---|---|---|")
    for level in levels:
        clean = [r for r in level["rows"] if r["fault"] == "-"]
        faulty = [r for r in level["rows"] if r["fault"] != "-"]
        same = all(level["accuracy"].get(s) == quiet.get(s) for s in quiet)
        print(f"| {level['burners_per_core']} | {sum(r['verdict'] == 'FAIL' for r in clean)} of {len(clean)} | "
              f"{sum(r['environment'] for r in clean)} | {sum(r['verdict'] == 'PASS' for r in clean)} | "
              f"{sum(r['raw'] == 'FAIL' for r in clean)} | {sum(r['verdict'] == 'FAIL' for r in faulty)} of "
              f"{len(faulty)} | {'yes' if same else 'no'} |")


if __name__ == "__main__":
    main()
