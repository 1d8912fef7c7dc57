"""Detection power of the accuracy gates: realistic regressions and clean seeds against the committed baselines.

    python benchmarks/detection/run.py [--seeds 11,12,13] [--clean-seeds 11,...,30] [--cases grpo,mopd]
        [--only NAME] [--runs-dir results/detection] [--jobs 2] [--json OUT] [--finished-only]

Each regression of ``autotest.workloads.regressions`` (at the magnitudes of ``GRID``) runs on every
seed of ``--seeds`` through its embedded workload, exactly as the case launches it; each clean seed
of ``--clean-seeds`` (outside the calibration seeds 0-9) runs without one. Every tracker is judged
against the committed ``baselines/tiny-<case>.yaml`` by the harness's own ``compare`` (the same
checks and triage as ``rl-autotest run``). Prints a markdown table: per regression and magnitude
the detection rate over seeds (verdict FAIL), the primary triage rule and the gates that fired;
per case the false-alarm rate over the clean seeds; the effect column is the late rewards' shift (GRPO,
steps 41-45) or distill_kl's relative change (MOPD, steps 1-25) against golden. Only accuracy gates count (step time measures the
machine's load here, not the change); the table also says how many runs the per-step gates alone
(every scope but ``pooled``) would have caught. A finished run is reused (delete
``--runs-dir`` to rerun), so re-judging after a recalibration costs no training. The same runs are
then judged two at a time as ``replicates: 2`` would (mean trace, pooled thresholds scaled): every
pair of a regression's seeds and disjoint pairs of clean seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from autotest.inputs.baseline import load_baseline
from autotest.readers.reading import read_trace
from autotest.judge.replicate_mean import for_the_mean, mean_trace
from autotest.judge.verdict import checked_metrics, compare
from autotest.scopes import scope_kind

WORKLOADS = {"grpo": "autotest.workloads.grpo", "mopd": "autotest.workloads.mopd_launch"}
#: (case, regression spec, what it models, primary); magnitudes from barely visible to obvious. The primary
#: row of each kind runs first on every seed; the other magnitudes follow (see main)
GRID = (
    ("grpo", "lr-scale:0.85", "optimiser lr x0.85", False),
    ("grpo", "lr-scale:0.7", "optimiser lr x0.7", True),
    ("grpo", "lr-scale:0.5", "optimiser lr x0.5", False),
    ("grpo", "lr-decay:0.5", "lr decays to 0.5x instead of 0.1x", False),
    ("grpo", "lr-decay:1.0", "lr decay lost (constant lr)", True),
    ("grpo", "grad-clip:0.3", "gradients clipped at 0.3 instead of 1.0", False),
    ("grpo", "grad-clip:0.1", "gradients clipped at 0.1 instead of 1.0", False),
    ("grpo", "adv-std-eps:0.1", "advantage std + 0.1 instead of + 1e-6", False),
    ("grpo", "adv-std-eps:0.5", "advantage std + 0.5 instead of + 1e-6", True),
    ("grpo", "clip-range:0.1", "PPO clip range 0.1 instead of 0.2", False),
    ("grpo", "clip-range:0.05", "PPO clip range 0.05 instead of 0.2", False),
    ("grpo", "entropy-scale:3", "entropy bonus x3", True),
    ("grpo", "entropy-scale:10", "entropy bonus x10", False),
    ("grpo", "judge-drops:0.15", "judge scores 15% of correct answers 0", False),
    ("grpo", "judge-drops:0.3", "judge scores 30% of correct answers 0", True),
    ("grpo", "length-penalty:0.003", "reward -0.003 per response token", True),
    ("grpo", "length-penalty:0.01", "reward -0.01 per response token", False),
    ("grpo", "sampling-temperature:1.1", "rollout samples at temperature 1.1", True),
    ("grpo", "sampling-temperature:1.3", "rollout samples at temperature 1.3", False),
    ("grpo", "top-k:12", "rollout samples from the top 12 of 16 tokens", True),
    ("grpo", "top-k:8", "rollout samples from the top 8 of 16 tokens", False),
    ("grpo", "stale-eval", "eval engine weights never refreshed", True),
    ("grpo", "eval-temperature:1.2", "sampled eval at temperature 1.2", True),
    ("grpo", "eval-temperature:1.5", "sampled eval at temperature 1.5", False),
    ("grpo", "undersample:0.5", "half of targets 7-9 replaced by duplicates", False),
    ("grpo", "undersample:1.0", "targets 7-9 never trained", True),
    ("mopd", "lr-scale:0.7", "student lr x0.7", False),
    ("mopd", "lr-scale:0.5", "student lr x0.5", False),
    ("mopd", "judge-drops:0.15", "judge scores 15% of correct answers 0", False),
    ("mopd", "judge-drops:0.3", "judge scores 30% of correct answers 0", False),
    ("mopd", "length-penalty:0.01", "reward -0.01 per response token", False),
    ("mopd", "undersample:0.5", "half of digit_product prompts replaced by duplicates", False),
    ("mopd", "misroute:0.1", "10% of samples routed to the wrong teacher", False),
    ("mopd", "misroute:0.2", "20% of samples routed to the wrong teacher", True),
    ("mopd", "teacher-temperature:1.1", "teachers score at temperature 1.1", True),
    ("mopd", "teacher-temperature:1.2", "teachers score at temperature 1.2", False),
)


def run_dir(runs_dir: Path, case: str, spec: str, seed: int, tag: str = "") -> Path:
    """Where one run of the grid lives (``tag``: runs under an environment of their own, kept apart)."""
    return runs_dir / case / ((spec or "clean").replace(":", "-") + (f"@{tag}" if tag else "")) / f"seed-{seed}"


def run_workload(case: str, spec: str, seed: int, runs_dir: Path, tag: str = "",
                 env: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> Path:
    """The run's work dir (reused when its tracker is complete); ``env`` on top of this process's, ``args`` after
    the workload's (a variant: give it a ``tag`` of its own)."""
    work = run_dir(runs_dir, case, spec, seed, tag)
    done = work / "DONE"
    if done.exists():
        return work
    if work.exists():  # an interrupted run: start over, so one work dir holds one run
        shutil.rmtree(work)
    work.mkdir(parents=True)
    cmd = [sys.executable, "-m", WORKLOADS[case], "--work-dir", str(work), "--seed", str(seed)]
    cmd += ["--fault", spec] if spec else []
    cmd += list(args)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", **(env or {})}
    with (work / "run.log").open("w") as log:
        code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, check=False, timeout=600).returncode
    done.write_text(str(code))
    return work


#: the effect a row reports: GRPO the late rewards (mean of steps 41-45) minus golden; MOPD distill_kl's
#: relative change, mean over steps 1-25
EFFECT = {"grpo": ("response/rewards/mean", range(41, 46), False),
          "mopd": ("distillation/reduced_distillation_kl", range(1, 26), True)}


def effect(case: str, baseline, trace) -> float | None:
    metric, steps, relative = EFFECT[case]
    series, golden = trace.get(metric) or {}, baseline.golden_table[metric]
    if not all(s in series and s in golden for s in steps):
        return None
    shift = sum(series[s] - golden[s] for s in steps) / len(steps)
    return shift / (sum(golden[s] for s in steps) / len(steps)) if relative else shift


def judge_run(case: str, work: Path) -> dict:
    return judge_runs(case, [work])


def judge_runs(case: str, works: list[Path]) -> dict:
    """One run, or the mean of several judged as ``replicates: K`` does (pooled thresholds scaled)."""
    baseline = load_baseline(ROOT / "baselines" / f"tiny-{case}.yaml")
    traces = [read_trace(w, aliases=dict(baseline.metric_aliases), metrics=checked_metrics(baseline)) for w in works]
    trace = traces[0]
    if len(traces) > 1:
        baseline, _ = for_the_mean(baseline, len(traces))
        trace = mean_trace(traces, [w.name for w in works])
    verdict = compare(baseline, trace, case=f"tiny-{case}").verdict
    primary = next((f.rule for f in verdict.triage if f.primary), "")
    # accuracy power only: step time on a shared 2-core machine measures the machine's load, not the change
    accuracy = [r for r in verdict.results if r.is_gate and r.kind == "metric"
                and not r.metric.startswith(("time/", "memory/"))]
    fired = sorted(r.check_id for r in accuracy if r.status == "FAIL")
    status = "FAIL" if fired else "ERROR" if any(r.status == "ERROR" for r in accuracy) else "PASS"
    # a run no accuracy gate caught has no triage of interest here (a step-time FAIL measures the load)
    primary = primary if fired else ""
    margins = {r.check_id: r.observed / r.threshold for r in accuracy
               if r.observed is not None and r.threshold and r.observed == r.observed}
    return {"status": status, "verdict": verdict.status, "effect": effect(case, baseline, trace), "triage": primary, "fired": fired,
            "per_step_only": any(not scope_kind(r.scope).uses_noise for r in accuracy if r.status == "FAIL"),
            "closest": max(margins.items(), key=lambda kv: kv[1]) if margins else None}


def print_replicate_pairs(cases: list[str], jobs: list[tuple[str, str, int]], works: list[Path]) -> None:
    """The same runs judged two at a time as ``replicates: 2``: every pair of a regression's seeds, and
    disjoint pairs of clean seeds (each clean run in one pair only, so the false alarms stay independent)."""
    by_row: dict[tuple[str, str], list[tuple[int, Path]]] = {}
    for (case, spec, seed), work in zip(jobs, works):
        by_row.setdefault((case, spec), []).append((seed, work))
    print("\nThe same runs as `replicates: 2` (the mean of two seeds; pooled thresholds scaled):\n")
    print("| case | regression | detected (pairs of seeds) | primary triage |")
    print("|---|---|---|---|")
    for case, spec, _, _ in GRID:
        runs = sorted(by_row.get((case, spec), []))
        pairs = [(a, b) for i, a in enumerate(runs) for b in runs[i + 1:]]
        if not pairs:
            continue
        judged = [judge_runs(case, [a[1], b[1]]) for a, b in pairs]
        hits = sum(r["status"] == "FAIL" for r in judged)
        triage = ", ".join(sorted({r["triage"] or "-" for r in judged}))
        print(f"| tiny-{case} | `{spec}` | {hits}/{len(pairs)} | {triage} |")
    for case in cases:
        clean = sorted(by_row.get((case, ""), []))
        pairs = list(zip(clean[0::2], clean[1::2]))
        if pairs:
            judged = [judge_runs(case, [a[1], b[1]]) for a, b in pairs]
            alarms = sum(r["status"] != "PASS" for r in judged)
            worst = max((r["closest"] for r in judged if r["closest"]), key=lambda kv: kv[1], default=None)
            closest = f"; closest gate {worst[0]} at {worst[1]:.2f} of its threshold" if worst else ""
            print(f"\ntiny-{case} as replicates: 2: false alarms {alarms}/{len(pairs)} disjoint pairs of clean "
                  f"seeds{closest}")


def minimum_detectable_effects(case: str) -> list[str]:
    """Per accuracy gate: the constant shift over its steps that puts its statistic at the threshold.

    Pooled: a shift d at every step gives mean z = d x mean(1 / noise_s), so d = threshold / mean(1 / noise_s).
    Per-step absolute (points, final, percentile, stepwise): d = threshold; relative: threshold x |golden|;
    a bound (method value) is its own threshold. That shift is caught about half of the time (noise on top
    pushes either way); twice it nearly always. The last column is d relative to golden over those steps.
    """
    baseline = load_baseline(ROOT / "baselines" / f"tiny-{case}.yaml")
    lines = []
    for check in baseline.checks:
        if check.severity != "gate" or check.metric.startswith(("time/", "memory/")):
            continue
        golden = baseline.golden_table.get(check.metric) or {}
        if scope_kind(check.scope).uses_noise:
            noise = baseline.noise_table[check.metric]
            first, last = check.window or (min(noise), max(noise))
            steps = [s for s in noise if first <= s <= last]
            shift = check.threshold / (sum(1 / noise[s] for s in steps) / len(steps))
            unit = "x noise"
        else:
            steps = scope_kind(check.scope).mde_steps(check, golden)
            level = sum(abs(golden[s]) for s in steps if s in golden) / max(1, len(steps))
            shift = check.threshold * level if check.method == "relative" else check.threshold
            unit = "relative" if check.method == "relative" else "bound" if check.method == "value" else "absolute"
        level = sum(abs(golden[s]) for s in steps if s in golden) / max(1, len(steps))
        # k3's golden is ~1e-15 (fp32 round-off): a share of it says nothing
        relative = f"{shift / level:.1%}" if level and not check.metric.startswith("mismatch/") else "-"
        lines.append(f"| tiny-{case} | `{check.check_id}` | {check.threshold:g} ({unit}) | {shift:.3g} | {relative} |")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="11,12,13")
    p.add_argument("--clean-seeds", default=",".join(str(s) for s in range(11, 31)))
    p.add_argument("--cases", default="grpo,mopd")
    p.add_argument("--only", help="run only regressions whose spec starts with one of these (comma-separated)")
    p.add_argument("--runs-dir", type=Path, default=ROOT / "results" / "detection")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--json", type=Path)
    p.add_argument("--finished-only", action="store_true", help="judge the finished runs only; start none")
    args = p.parse_args()
    cases = args.cases.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    clean = [int(s) for s in args.clean_seeds.split(",") if s]
    only = tuple(args.only.split(",")) if args.only else ("",)
    # in rounds, each a share of the clean seeds and one seed of every regression: a grid stopped early
    # (then judged with --finished-only) still has every row and a false-alarm rate
    jobs = []
    grid = [(c, spec) for c, spec, _, _ in GRID if c in cases and spec.startswith(only)]
    primary = [(c, spec) for c, spec, _, first in GRID if first and (c, spec) in grid]
    for round_, seed in enumerate(seeds):
        share = clean[round_ * len(clean) // len(seeds):(round_ + 1) * len(clean) // len(seeds)]
        jobs += [(c, "", s) for s in share for c in cases]
        jobs += [(c, spec, seed) for c, spec in primary]
    jobs += [(c, spec, seed) for seed in seeds for c, spec in grid if (c, spec) not in primary]
    if args.finished_only:
        jobs = [j for j in jobs if (run_dir(args.runs_dir, *j) / "DONE").exists()]
    start = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        works = list(pool.map(lambda j: run_workload(j[0], j[1], j[2], args.runs_dir), jobs))
    results = [{"case": c, "spec": spec, "seed": s, **judge_run(c, w)} for (c, spec, s), w in zip(jobs, works)]
    print(f"{len(jobs)} runs in {time.perf_counter() - start:.0f} s (finished runs reused)\n")
    print("| case | regression | what it models | effect per seed | detected | by per-step gates alone | primary "
          "triage | gates that fired |")
    print("|---|---|---|---|---|---|---|---|")
    for case, spec, what, _ in GRID:
        rows = [r for r in results if r["case"] == case and r["spec"] == spec]
        if not rows:
            continue
        hits = sum(r["status"] == "FAIL" for r in rows)
        old = sum(r["per_step_only"] for r in rows)
        triage = ", ".join(sorted({r["triage"] or "-" for r in rows}))
        fired = sorted({f for r in rows for f in r["fired"]})
        shifts = ", ".join("-" if r["effect"] is None else
                           f"{r['effect']:+.0%}" if case == "mopd" else f"{r['effect']:+.2f}" for r in rows)
        print(f"| tiny-{case} | `{spec}` | {what} | {shifts} | {hits}/{len(rows)} | {old}/{len(rows)} | {triage} | "
              f"{', '.join(fired) or '-'} |")
    for case in cases:
        rows = [r for r in results if r["case"] == case and not r["spec"]]
        if rows:
            alarms = sum(r["status"] != "PASS" for r in rows)  # an undecided accuracy gate counts as an alarm
            worst = max((r["closest"] for r in rows if r["closest"]), key=lambda kv: kv[1], default=None)
            closest = f"; closest gate {worst[0]} at {worst[1]:.2f} of its threshold" if worst else ""
            spread = ", ".join(f"{r['effect']:+.0%}" if case == "mopd" else f"{r['effect']:+.2f}" for r in rows
                               if r["effect"] is not None)
            print(f"\ntiny-{case}: false alarms {alarms}/{len(rows)} clean seeds (effect {spread}) "
                  f"({', '.join(str(r['seed']) for r in rows)}){closest}")
    print_replicate_pairs(cases, jobs, works)
    print("\n| case | accuracy gate | threshold | constant shift detected half the time | as a share of golden |")
    print("|---|---|---|---|---|")
    for case in cases:
        print("\n".join(minimum_detectable_effects(case)))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
