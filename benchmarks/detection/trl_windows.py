"""Detection on a trainer nobody here wrote: the TRL example's four realistic regressions at ``power``'s design.

Reads runs made beforehand with ``examples/trl-grpo/train.py`` (one folder per condition and seed, each holding
its ``tracker.jsonl``; the condition is ``clean`` or a ``--fault`` value with ``:`` written ``-``):

    python train.py --output-dir RUNS/clean-seed11 --seed 11
    python train.py --output-dir RUNS/grader_drop-0.3-seed11 --seed 11 --fault grader_drop:0.3

and judges each condition at K replicates per verdict (consecutive seeds, K at a time: seeds 11-12 one verdict,
13-14 the next, ...) against the committed baseline, with its pooled thresholds scaled for the K-run mean as a
``replicates: K`` case does (:func:`autotest.judge.replicate_mean.for_the_mean`). Prints, per regression, its
effect per window on each checked metric (the mean over its seeds of the regression minus the clean run of the same
seed, over the window's steps), the verdicts and the gates that failed; for clean seeds, the false alarms.

    python benchmarks/detection/trl_windows.py --runs RUNS -K 2 --verdicts 3
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from autotest.calibration.proposals import thirds
from autotest.inputs.baseline import load_baseline
from autotest.judge.power import PowerAsk
from autotest.judge.replicate_mean import for_the_mean, mean_trace
from autotest.judge.verdict import judge
from autotest.readers.reading import read_trace
from autotest.scopes import scope_kind

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "examples" / "trl-grpo" / "accuracy" / "baselines" / "trl-grpo.yaml"
CONDITIONS = ("lr_scale-0.5", "grader_drop-0.3", "loss_type-grpo", "generations-4", "clean")


def _trace(runs: Path, condition: str, seed: int):
    path = runs / f"{condition}-seed{seed}" / "tracker.jsonl"
    return read_trace(path, "xtuner") if path.is_file() else None


def _windows(baseline) -> list[tuple[int, int]]:
    """The early, middle and late thirds of the golden's steps (init's windows) and the whole run."""
    steps = sorted(next(iter((baseline.golden_table or {}).values()), {}))
    return [*thirds(steps), (steps[0], steps[-1])] if steps else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, required=True)
    parser.add_argument("-K", type=int, default=1, help="replicates per verdict")
    parser.add_argument("--verdicts", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=11)
    parser.add_argument("--baseline", type=Path, default=BASELINE)
    args = parser.parse_args()
    calibrated = load_baseline(args.baseline)
    judged, scale = for_the_mean(calibrated, args.K)
    metrics = sorted({c.metric for c in calibrated.checks if scope_kind(c.scope).uses_noise})  # the pooled gates
    windows = _windows(calibrated)
    seeds = [args.first_seed + i for i in range(args.K * args.verdicts)]
    print(f"baseline {args.baseline}: K={args.K} (pooled thresholds x {scale:.3f}), seeds {seeds}")
    for condition in CONDITIONS:
        traces = {s: _trace(args.runs, condition, s) for s in seeds}
        if condition != "clean":
            paired = [s for s in seeds if traces[s] is not None and _trace(args.runs, "clean", s) is not None]
            effects = []
            for metric in metrics:
                cells = []
                for first, last in windows:
                    diffs = []
                    for s in paired:
                        clean, bad = _trace(args.runs, "clean", s), traces[s]
                        steps = [t for t in range(first, last + 1) if t in clean.series.get(metric, {})
                                 and t in bad.series.get(metric, {})]
                        diffs.append(np.mean([bad.series[metric][t] - clean.series[metric][t] for t in steps]))
                    cells.append(f"{first}-{last} {np.mean(diffs):+.3g}" if diffs else f"{first}-{last} ?")
                effects.append(f"{metric}: " + ", ".join(cells))
            print(f"\n{condition}: effect (regression - clean, same seed, mean over seeds {paired}) per window")
            print("  " + "\n  ".join(effects))
        else:
            print("\nclean (held-out seeds):")
        for v in range(args.verdicts):
            group = seeds[v * args.K:(v + 1) * args.K]
            members = [traces[s] for s in group]
            if any(m is None for m in members):
                print(f"  seeds {group}: missing runs")
                continue
            current = members[0] if args.K == 1 else mean_trace(members, [f"seed {s}" for s in group],
                                                                calibrated.role_map)
            verdict = judge(judged, current, case="trl-grpo",
                            power=PowerAsk(replicates=args.K, calibrated=calibrated)).verdict
            failed = [f"{r.check_id} ({r.observed:+.3g} / {r.threshold:.3g})" if r.observed is not None
                      else r.check_id for r in verdict.results if r.is_gate and r.status == "FAIL"]
            print(f"  seeds {group}: {verdict.status}" + (f": {', '.join(failed)}" if failed else ""))


if __name__ == "__main__":
    main()
