"""Paired A/B gating beside golden gating at equal cost, on the embedded GRPO workload (issue 32, item 6).

    python benchmarks/detection/paired.py [--seeds 11,12,13] [--aa-seeds 11,...,20] [--only SPEC,...] [--all]
        [--runs-dir results/detection] [--jobs 2]

Both judge two runs:

- **golden, replicates: 2**: two seeds of the regression, their mean against ``baselines/tiny-grpo.yaml``
  (pooled thresholds scaled, as ``replicates: 2`` does); every pair of ``--seeds``;
- **paired, one seed per side**: the regression and a clean run on the same seed, judged by the baseline's
  ``paired:`` gates (:func:`autotest.judge.paired.judge_paired`); every seed of ``--seeds``.

Rows: the primary GRPO regressions of the detection grid (``benchmarks/detection/run.py``). Then the A/A false
alarms: a clean run against the same seed nudged by ``RL_AUTOTEST_AA_PERTURB=1`` (the perturbation the paired
noise was measured with) on seeds outside calibration. Then two environment changes the benchmark makes: a
``sitecustomize`` that moves ``torch.optim.Adam``'s default beta1 from 0.9 to 0.5 or to 0.97 (a library whose
default changed; the workload leaves Adam's betas at their default), for every run of both sides. Under it: a pair with
no code change and a regression, each judged golden, paired, and paired with the A/A guard (``ab --aa-check``:
the base again as the A/A pairs were; a guard that moves makes the A/B an ERROR, not a verdict).

Last, the equivalence variant ``grad-accum-4`` against the case on each seed, clean and with the fault that breaks
it (``loss-per-microbatch``), judged paired.

Runs are the detection benchmark's (same folder, reused when finished); only accuracy gates count.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import GRID, judge_runs, run_workload  # noqa: E402  (benchmarks/detection/run.py)

from autotest.inputs.baseline import load_baseline  # noqa: E402
from autotest.judge.paired import judge_paired  # noqa: E402
from autotest.judge.verdict import checked_metrics  # noqa: E402
from autotest.readers.reading import read_trace  # noqa: E402

AA = ("aa", {"RL_AUTOTEST_AA_PERTURB": "1"})
#: environment changes the benchmark makes: a library whose Adam default beta1 moved (the workload leaves Adam's
#: betas at their default); 0.5 learns faster (pairs part sooner), 0.97 slower
ENV_BETA1 = {"adam-beta1-0.5": 0.5, "adam-beta1-0.97": 0.97}
SITECUSTOMIZE = '''# rl-autotest benchmark: a library whose Adam default moved (beta1 0.9 -> {beta1})
import torch.optim

_defaults = list(torch.optim.Adam.__init__.__defaults__)
_defaults[1] = ({beta1}, 0.999)
torch.optim.Adam.__init__.__defaults__ = tuple(_defaults)
'''
ENV_REGRESSION = "lr-scale:0.7"
#: the case's equivalence variant grad-accum-4 and the fault that breaks it (bitwise clean without the variant)
VARIANT = ("grad-accum-4", ("--micro-batches", "4"))
EQUIVALENCE_FAULT = "loss-per-microbatch"


def environment(runs_dir: Path, tag: str) -> dict[str, str]:
    """The changed environment ``tag``: its sitecustomize first on the path."""
    folder = runs_dir / "environments" / tag
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE.format(beta1=ENV_BETA1[tag]))
    return {"PYTHONPATH": f"{folder}:{ROOT}"}


def paired_status(baseline, pairs: list[tuple[int, Path, Path]]) -> tuple[str, list[str]]:
    """The paired verdict of (seed, base work, head work) pairs and the gates that moved."""
    def trace(work: Path):
        return read_trace(work, aliases=dict(baseline.metric_aliases), metrics=checked_metrics(baseline))

    verdict = judge_paired(baseline.paired, [(s, trace(b), trace(h)) for s, b, h in pairs], "calibrate --paired")
    return verdict.status, [r.gate_id for r in verdict.failed]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="11,12,13")
    p.add_argument("--aa-seeds", default=",".join(str(s) for s in range(11, 21)))
    p.add_argument("--only", help="regressions whose spec starts with one of these (comma-separated)")
    p.add_argument("--runs-dir", type=Path, default=ROOT / "results" / "detection")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--all", action="store_true", help="every GRPO magnitude of the grid, not only the primary rows")
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    aa_seeds = [int(s) for s in args.aa_seeds.split(",")]
    only = tuple(args.only.split(",")) if args.only else ("",)
    regressions = [(spec, what) for case, spec, what, primary in GRID
                   if case == "grpo" and (primary or args.all) and spec.startswith(only)]
    # (spec, seed, tag, env)
    jobs = [("", s, "", None) for s in sorted(set(seeds) | set(aa_seeds))]
    jobs += [("", s, AA[0], AA[1]) for s in aa_seeds]
    jobs += [(spec, s, "", None) for spec, _ in regressions for s in seeds]
    for tag in ENV_BETA1:
        env = environment(args.runs_dir, tag)
        jobs += [(spec, s, tag, env) for spec in ("", ENV_REGRESSION) for s in seeds]
        jobs += [("", s, f"{tag}+{AA[0]}", {**env, **AA[1]}) for s in seeds]
    jobs += [(spec, s, VARIANT[0], None) for spec in ("", EQUIVALENCE_FAULT) for s in seeds]
    jobs += [(EQUIVALENCE_FAULT, s, "", None) for s in seeds]
    start = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        works = list(pool.map(lambda j: run_workload("grpo", j[0], j[1], args.runs_dir, j[2], j[3],
                                                     VARIANT[1] if j[2] == VARIANT[0] else ()), jobs))
    work = {(spec, seed, tag): w for (spec, seed, tag, _), w in zip(jobs, works)}
    baseline = load_baseline(ROOT / "baselines" / "tiny-grpo.yaml")
    print(f"{len(jobs)} runs in {time.perf_counter() - start:.0f} s (finished runs reused)\n")

    print("| regression | what it models | golden, replicates: 2 (pairs of seeds) | paired, 1 seed per side "
          "(seeds) | paired gates that moved |")
    print("|---|---|---|---|---|")
    for spec, what in regressions:
        golden = [judge_runs("grpo", [work[(spec, a, "")], work[(spec, b, "")]])["status"]
                  for a, b in itertools.combinations(seeds, 2)]
        paired = [paired_status(baseline, [(s, work[("", s, "")], work[(spec, s, "")])]) for s in seeds]
        moved = sorted({g for _, gates in paired for g in gates})
        print(f"| `{spec}` | {what} | {golden.count('FAIL')}/{len(golden)} | "
              f"{sum(st == 'FAIL' for st, _ in paired)}/{len(paired)} | {', '.join(moved[:4]) or '-'}"
              f"{' …' if len(moved) > 4 else ''} |")

    aa = [paired_status(baseline, [(s, work[("", s, "")], work[("", s, AA[0])])]) for s in aa_seeds]
    alarms = [s for s, (st, _) in zip(aa_seeds, aa) if st != "PASS"]
    windows = len(baseline.paired.windows) if baseline.paired else 0
    print(f"\nA/A false alarms (paired, 1 seed per side, {windows} windows, budget "
          f"{baseline.paired.false_alarm_budget if baseline.paired else '-'} per judgement): "
          f"{len(alarms)}/{len(aa)} seeds{' (' + ', '.join(map(str, alarms)) + ')' if alarms else ''}")

    print(f"\nEquivalence variant `{VARIANT[0]}` (`{' '.join(VARIANT[1])}`) against the case on the same seed, "
          "paired:\n")
    print("| pair | paired verdicts |")
    print("|---|---|")
    for what, spec in (("clean against the variant (must train the same)", ""),
                       (f"`{EQUIVALENCE_FAULT}` against the variant with it (the equivalence broken)",
                        EQUIVALENCE_FAULT)):
        statuses = [paired_status(baseline, [(s, work[(spec, s, "")], work[(spec, s, VARIANT[0])])])[0]
                    for s in seeds]
        print(f"| {what} | {_counts(statuses)} |")

    for tag in ENV_BETA1:
        print(f"\nEnvironment change `{tag}` (both sides under it; per seed):\n")
        print("| what | golden (1 run) | paired (1 seed per side) | paired with the A/A guard (+1 run) |")
        print("|---|---|---|---|")
        guard = {s: paired_status(baseline, [(s, work[("", s, tag)], work[("", s, f"{tag}+{AA[0]}")])])[0]
                 for s in seeds}
        rows = (("no code change (paired: an A/A pair, as GPU non-determinism makes it)", "", f"{tag}+{AA[0]}"),
                (f"`{ENV_REGRESSION}` under the change", ENV_REGRESSION, tag))
        for what, spec, head_tag in rows:
            golden = [judge_runs("grpo", [work[(spec, s, head_tag)]])["status"] for s in seeds]
            paired = [paired_status(baseline, [(s, work[("", s, tag)], work[(spec, s, head_tag)])])[0]
                      for s in seeds]
            guarded = ["ERROR" if guard[s] == "FAIL" and st != "ERROR" else st for s, st in zip(seeds, paired)]
            print(f"| {what} | {_counts(golden)} | {_counts(paired)} | {_counts(guarded)} |")
    return 0


def _counts(statuses: list[str]) -> str:
    return ", ".join(f"{statuses.count(s)} {s}" for s in ("PASS", "FAIL", "ERROR") if statuses.count(s))


if __name__ == "__main__":
    sys.exit(main())
