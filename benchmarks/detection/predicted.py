"""Predicted against measured: does a regression above a gate's MDE get caught, and one below it mostly not?

    python benchmarks/detection/predicted.py [--case grpo] [--seeds 11,12,13] [--only lr-scale,judge-drops]
        [--baseline baselines/tiny-grpo.yaml] [--runs-dir results/detection] [--jobs 2] [--finished-only]

Per regression of ``run.GRID`` (``--only`` picks some) and per accuracy gate with a minimum detectable
effect (``autotest.judge.power``, from the baseline alone): the MDE calibration predicts for one run (K=1)
and for the mean of two (K=2), next to the effect measured on the runs and the rate at which that gate
fired over the seeds. The measured effect is the gate's own statistic turned into a constant shift of the
metric: pooled gates, the mean z over the window x the harmonic-mean noise (the shift that gives the same
statistic, signed); the final point, run minus golden (signed); per-step percentile or points gates, the
statistic they bound (|error|, a share of golden for a relative check). Its mean over the seeds estimates the
regression's true effect on that gate; the seeds' own effects scatter around it by the seed noise.

The prediction under test: an effect at or above the MDE (80% power) is caught on >= 80% of seeds; one at
the threshold's shift ("half": caught half the time) about half; one well below it (< half x 0.5) almost
never. The summary counts (gate, seed) cases in three bands of the regression's mean effect. Runs are the
detection grid's (``run.run_workload``, the same folders), so finished runs are reused.
"""

from __future__ import annotations

import argparse
import math
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import GRID, ROOT, run_dir, run_workload  # noqa: E402  (the detection grid beside this file)

from autotest.inputs.baseline import Baseline, load_baseline  # noqa: E402
from autotest.judge.power import baseline_power, half_power_shift, measured_shift  # noqa: E402
from autotest.readers.reading import read_trace  # noqa: E402
from autotest.judge.verdict import checked_metrics, compare  # noqa: E402


def judged(baseline: Baseline, work: Path, case: str) -> dict[str, tuple[float | None, bool]]:
    """check id -> (effect, fired) for every accuracy gate with an MDE."""
    trace = read_trace(work, aliases=dict(baseline.metric_aliases), metrics=checked_metrics(baseline))
    verdict = compare(baseline, trace, case=f"tiny-{case}").verdict
    results = {r.check_id: r for r in verdict.results if r.kind == "metric"}
    checks = {c.check_id: c for c in baseline.checks}
    out = {}
    for power in baseline_power(baseline):
        check, result = checks[power.check_id], results.get(power.check_id)
        if check.metric.startswith(("time/", "memory/")) or result is None:
            continue
        out[power.check_id] = (measured_shift(baseline, check, trace.get(check.metric) or {}, result.observed), result.status == "FAIL")
    return out


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:+.2g}" if abs(value) >= 1e-3 or value == 0 else f"{value:+.1e}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", default="grpo", choices=("grpo", "mopd"))
    p.add_argument("--seeds", default="11,12,13")
    p.add_argument("--only", help="regressions whose spec starts with one of these (comma-separated)")
    p.add_argument("--extra", default="", help="more regression specs, comma-separated (e.g. rope-theta:1e6)")
    p.add_argument("--baseline", type=Path, help="default: baselines/tiny-<case>.yaml")
    p.add_argument("--runs-dir", type=Path, default=ROOT / "results" / "detection")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--finished-only", action="store_true", help="judge the finished runs only; start none")
    args = p.parse_args()
    baseline = load_baseline(args.baseline or ROOT / "baselines" / f"tiny-{args.case}.yaml")
    seeds = [int(s) for s in args.seeds.split(",")]
    only = tuple(args.only.split(",")) if args.only else ("",)
    specs = [spec for case, spec, _, _ in GRID if case == args.case and spec.startswith(only)]
    extra = [s for s in args.extra.split(",") if s]
    # the extra specs first (each on every seed), then per seed a clean run and the grid's
    jobs = [(spec, seed) for spec in extra for seed in seeds]
    jobs += [(spec, seed) for seed in seeds for spec in [""] + specs if spec not in extra]
    specs += [s for s in extra if s not in specs]
    if args.finished_only:
        jobs = [j for j in jobs if (run_dir(args.runs_dir, args.case, *j) / "DONE").exists()]
    with ThreadPoolExecutor(args.jobs) as pool:
        works = list(pool.map(lambda j: run_workload(args.case, j[0], j[1], args.runs_dir), jobs))
    by_spec: dict[str, list[tuple[int, dict]]] = {}
    for (spec, seed), work in zip(jobs, works):
        by_spec.setdefault(spec, []).append((seed, judged(baseline, work, args.case)))
    powers = {p.check_id: p for p in baseline_power(baseline)}
    checks = {c.check_id: c for c in baseline.checks}
    n = next(iter(powers.values())).calibration_runs if powers else 0
    print(f"Baseline {args.baseline or f'baselines/tiny-{args.case}.yaml'} (N = {n} calibration runs); "
          f"seeds {', '.join(map(str, seeds))}\n")
    print("| regression | gate | predicted MDE K=1 | K=2 | caught half the time | measured effect (mean; per seed) "
          "| detected |")
    print("|---|---|---|---|---|---|---|")
    bands = {"above MDE": [0, 0], "half..MDE": [0, 0], "0.5 half..half": [0, 0], "below 0.5 half": [0, 0]}
    for spec in ([""] + specs):
        rows = sorted(by_spec.get(spec, []))
        if not rows:
            continue
        for check_id, power in powers.items():
            seen = [(seed, r[check_id]) for seed, r in rows if check_id in r]
            if not seen:
                continue
            effects = [e for _, (e, _) in seen if e is not None]
            mean = math.fsum(effects) / len(effects) if effects else None
            hits = sum(fired for _, (_, fired) in seen)
            half = half_power_shift(baseline, checks[check_id])
            print(f"| `{spec or 'clean'}` | `{check_id}` | {power.mde(1):.3g} | {power.mde(2):.3g} | {half:.3g} | "
                  f"{fmt(mean)}; {', '.join(fmt(e) for _, (e, _) in seen)} | {hits}/{len(seen)} |")
            if mean is None:
                continue
            size = abs(mean)
            band = ("above MDE" if size >= power.mde(1) else "half..MDE" if size >= half else
                    "0.5 half..half" if size >= 0.5 * half else "below 0.5 half")
            bands[band][0] += hits
            bands[band][1] += len(seen)
    print("\nGate x seed cases by the regression's mean effect on the gate (clean seeds included):\n")
    for band, (hits, total) in bands.items():
        rate = f"{hits / total:.0%}" if total else "-"
        print(f"- {band}: caught {hits}/{total} ({rate})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
