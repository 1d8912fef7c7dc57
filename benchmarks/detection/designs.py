"""Verdict designs side by side on the embedded regression grid, with and without fail-fast (issue 43, item 4).

    python benchmarks/detection/designs.py [--seeds 11,12,13] [--clean-seeds 11,...,22] [--aa-seeds 11,...,14]
        [--runs-dir results/detection] [--jobs 1] [--finished-only]

Designs: golden K=1 (one run against ``baselines/tiny-grpo.yaml``), golden K=2 (the mean of two seeds, pooled
thresholds scaled as ``replicates: 2``: tiny-grpo declares no ``detect:`` targets, so ``power`` advises no K; K=2
narrows its pooled gates' MDE by about a quarter and is what ``--seeds 11,12`` allows), paired K=1 (the regression
against a clean run on the same seed, the baseline's ``paired:`` gates), and the ``pr`` tier of the case (steps
1-30, judged on the gates they hold: ``autotest.judge.tier``). Rows: the primary GRPO regressions of the detection
grid (``run.py``'s ``GRID``).

Runs are the detection benchmark's (``run.py``: same folders, reused when finished); A/A-nudged clean runs
(``RL_AUTOTEST_AA_PERTURB=1``, ``paired.py``'s) on ``--aa-seeds`` give the paired design's false alarms. Every run
trains its 45 steps; fail-fast is replayed on its tracker: at each logged step, the prefix up to it is judged by
the live follower's rule (``autotest.judge.checks.decide_early`` for every accuracy gate, under the baseline that
fail-fast judges with: ``autotest.judge.step_looks``; replicates on the mean of their prefixes), and the first step
at which a gate is decided FAIL is where the follower stops the run (it reacts within a step, ``autotest.judge.
live``); a run no prefix fails is judged whole by the same baseline. The paired gates have no live follower in the
harness: their fail-fast column is what one would give, each window decided when its last step is logged.

Only accuracy gates count (step time and memory measure this shared machine's load here, as in ``run.py``). Columns:

- detected: FAIL verdicts over the regressions' verdicts (K=2: every pair of a regression's seeds);
- false alarms: verdicts on clean seeds that are not PASS (K=2: disjoint pairs of clean seeds; paired: a clean run
  against the A/A-nudged run of its seed), against the case's budget of 0.05 per verdict;
- to FAIL: the median over caught verdicts of the share of the run's training time spent up to the step the FAIL
  was decided (no fail-fast: the whole run; the tier: its 30 steps), by the calibration runs' step times (the golden
  table's ``time/step``: the grid's own step times swing with this shared machine's load);
- device-s: the mean, over the regressions' verdicts and over the clean ones, of the training seconds of all the
  runs a verdict needs up to the step it was decided, by the same step times (``autotest.report.cost``'s device-seconds less each run's
  start-up, which every design pays once per run).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import GRID, run_workload  # noqa: E402  (benchmarks/detection/run.py)

from autotest.inputs.baseline import load_baseline  # noqa: E402
from autotest.inputs.case import load_case  # noqa: E402
from autotest.judge.checks import decide_early, run_checks  # noqa: E402
from autotest.judge.model import FAIL, PASS  # noqa: E402
from autotest.judge.paired import judge_paired  # noqa: E402
from autotest.judge.replicate_mean import for_the_mean, mean_trace  # noqa: E402
from autotest.judge.step_looks import with_step_looks  # noqa: E402
from autotest.judge.tier import tier_baseline  # noqa: E402
from autotest.judge.trace import Trace  # noqa: E402
from autotest.judge.verdict import checked_metrics, golden_trace  # noqa: E402
from autotest.readers.reading import read_trace  # noqa: E402

AA = ("aa", {"RL_AUTOTEST_AA_PERTURB": "1"})
STEP_TIME = "time/step"
MACHINE = ("time/", "memory/")


def accuracy_only(baseline):
    """The baseline's accuracy gates (and references): step time and memory measure the machine here."""
    return replace(baseline, checks=tuple(c for c in baseline.checks if not c.metric.startswith(MACHINE)))


def prefix(trace: Trace, last: int) -> Trace:
    """``trace`` as the follower saw it once step ``last`` was logged."""
    series = {m: MappingProxyType({s: v for s, v in values.items() if s <= last}) for m, values in trace.series.items()}
    return replace(trace, series=MappingProxyType(series), train_steps=tuple(s for s in trace.train_steps if s <= last),
                   eval_steps=tuple(s for s in trace.eval_steps if s <= last))


def failed(baseline, golden, trace: Trace) -> bool:
    return any(r.status == FAIL for r in run_checks(baseline, golden, trace, True) if r.is_gate)


def not_passed(baseline, golden, trace: Trace) -> bool:
    return any(r.status != PASS for r in run_checks(baseline, golden, trace, True) if r.is_gate)


def golden_verdict(baseline, traces: list[Trace], fail_fast: bool, last: int) -> tuple[str, int]:
    """(PASS | FAIL | ERROR, the step it was decided at) of the mean of ``traces`` up to step ``last``."""
    judged = with_step_looks(baseline) if fail_fast else baseline
    if len(traces) > 1:
        judged, _ = for_the_mean(judged, len(traces))
    golden = golden_trace(baseline)
    whole = traces[0] if len(traces) == 1 else mean_trace(traces, [str(i) for i in range(len(traces))])
    whole = prefix(whole, last)
    if fail_fast:
        for step in whole.train_steps:
            seen = prefix(whole, step)
            for spec in judged.checks:
                if spec.severity != "gate":
                    continue
                result = decide_early(spec, judged, golden, seen, True)
                if result is not None and result.status == FAIL:
                    return FAIL, step
    if failed(judged, golden, whole):
        return FAIL, last
    return ("ERROR" if not_passed(judged, golden, whole) else PASS), last


def paired_verdict(baseline, pairs: list[tuple[int, Trace, Trace]], fail_fast: bool, last: int) -> tuple[str, int]:
    """The paired gates' verdict; with fail-fast each window decided once its last step is logged."""
    if fail_fast:
        for step in range(1, last + 1):
            seen = [(s, prefix(b, step), prefix(h, step)) for s, b, h in pairs]
            done = [r for r in judge_paired(baseline.paired, seen, "calibrate --paired").results if r.window[1] <= step]
            if any(r.status == FAIL for r in done):
                return FAIL, step
    return judge_paired(baseline.paired, pairs, "calibrate --paired").status, last


def training_share(step: int) -> tuple[float, float]:
    """(share of a run's training time spent up to ``step``, those seconds) by the golden table's step times (the
    calibration runs'): the runs' own step times swing with this shared machine's load."""
    times = load_baseline(ROOT / "baselines" / "tiny-grpo.yaml").golden_table[STEP_TIME]
    total = sum(times.values())
    spent = sum(v for s, v in times.items() if s <= step)
    return spent / total, spent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="11,12,13")
    p.add_argument("--clean-seeds", default=",".join(str(s) for s in range(11, 23)))
    p.add_argument("--aa-seeds", default="11,12,13,14")
    p.add_argument("--runs-dir", type=Path, default=ROOT / "results" / "detection")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--finished-only", action="store_true", help="judge the finished runs only; start none")
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    clean = [int(s) for s in args.clean_seeds.split(",")]
    aa = [int(s) for s in args.aa_seeds.split(",")]
    rows = [(spec, what) for case, spec, what, primary in GRID if case == "grpo" and primary]
    jobs = [("", s, "") for s in clean] + [("", s, AA[0]) for s in aa]
    jobs += [(spec, s, "") for spec, _ in rows for s in seeds]
    if args.finished_only:
        from run import run_dir
        jobs = [j for j in jobs if (run_dir(args.runs_dir, "grpo", j[0], j[1], j[2]) / "DONE").exists()]
    start = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        works = list(pool.map(lambda j: run_workload("grpo", j[0], j[1], args.runs_dir, j[2],
                                                     AA[1] if j[2] else None), jobs))
    print(f"{len(jobs)} runs in {time.perf_counter() - start:.0f} s (finished runs reused)\n")
    baseline = accuracy_only(load_baseline(ROOT / "baselines" / "tiny-grpo.yaml"))
    metrics = checked_metrics(load_baseline(ROOT / "baselines" / "tiny-grpo.yaml"))
    traces = {job: read_trace(work, aliases=dict(baseline.metric_aliases), metrics=metrics)
              for job, work in zip(jobs, works)}
    full = load_case("tiny-grpo").expected.steps
    tier = load_case("tiny-grpo").tiers["pr"].steps
    tiered = tier_baseline(baseline, tier)

    def regression_sets(k: int, spec: str) -> list[list[int]]:
        have = [s for s in seeds if (spec, s, "") in traces]
        return [list(c) for c in itertools.combinations(have, k)]

    designs = {  # name -> (runs per verdict, judge(regression spec or "" for clean) -> list of (status, step, seeds))
        "golden K=1": 1, "golden K=2": 2, "paired K=1": 2, f"pr tier ({tier} of {full} steps), K=1": 1}
    print("| design | fail-fast | detected | false alarms | to FAIL (median share of training time) | "
          "device-s per verdict, regressions | device-s per verdict, clean |")
    print("|---|---|---|---|---|---|---|")
    per_row: dict[tuple[str, bool], list[str]] = {}
    steps_at: dict[str, dict[str, list[int]]] = {}
    for name, runs in designs.items():
        for fail_fast in (False, True):
            caught, verdicts, shares, cost, alarms, clean_verdicts = 0, 0, [], [], 0, 0
            row_hits, decided = [], {}
            for spec, _ in rows:
                hits = total = 0
                groups = ([[s] for s in seeds if (spec, s, "") in traces and ("", s, "") in traces]
                          if name.startswith("paired") else regression_sets(runs, spec))
                for group in groups:
                    status, step, used = _judge(name, baseline, tiered, traces, spec, group, fail_fast, full, tier)
                    total += 1
                    hits += status == FAIL
                    share, _ = training_share(step)
                    if status == FAIL:
                        shares.append(share)
                        if fail_fast:
                            decided.setdefault(spec, []).append(step)
                    cost.append(used)
                row_hits.append(f"{hits}/{total}")
                caught += hits
                verdicts += total
            per_row[(name, fail_fast)] = row_hits
            if fail_fast:
                steps_at[name] = decided
            clean_cost = []
            for group in _clean_groups(name, runs, clean, aa, traces):
                status, step, used = _judge(name, baseline, tiered, traces, "", group, fail_fast, full, tier)
                clean_verdicts += 1
                alarms += status != PASS
                clean_cost.append(used)
            median = f"{statistics.median(shares):.0%}" if shares else "-"
            print(f"| {name} | {'yes' if fail_fast else 'no'} | {caught}/{verdicts} ({caught / max(1, verdicts):.0%}) "
                  f"| {alarms}/{clean_verdicts} | {median} | {_mean(cost)} | {_mean(clean_cost)} |")
    print(f"\nPer regression (detected, fail-fast no / yes; with fail-fast, the steps of {full} it was decided at):\n")
    print("| regression | what it models | " + " | ".join(designs) + " |")
    print("|---|---|" + "---|" * len(designs))
    for i, (spec, what) in enumerate(rows):
        cells = [f"{per_row[(n, False)][i]} / {per_row[(n, True)][i]}"
                 + (f" (at {', '.join(map(str, sorted(steps_at[n][spec])))})" if steps_at[n].get(spec) else "")
                 for n in designs]
        print(f"| `{spec}` | {what} | " + " | ".join(cells) + " |")
    return 0


def _mean(values: list[float]) -> str:
    return f"{statistics.mean(values):.1f}" if values else "-"


def _clean_groups(name: str, runs: int, clean: list[int], aa: list[int], traces) -> list[list[int]]:
    if name.startswith("paired"):
        return [[s] for s in aa if ("", s, "") in traces and ("", s, AA[0]) in traces]
    have = [s for s in clean if ("", s, "") in traces]
    return [have[i:i + runs] for i in range(0, len(have) - runs + 1, runs)]  # disjoint: independent alarms


def _judge(name: str, baseline, tiered, traces, spec: str, group: list[int], fail_fast: bool, full: int,
           tier: int) -> tuple[str, int, float]:
    """(status, step decided, training seconds of every run the verdict needs up to that step)."""
    if name.startswith("paired"):
        seed = group[0]
        base, head = traces[("", seed, "")], traces[(spec, seed, "") if spec else ("", seed, AA[0])]
        status, step = paired_verdict(baseline, [(seed, base, head)], fail_fast, full)
        return status, step, 2 * training_share(step)[1]
    runs = [traces[(spec, s, "")] for s in group]
    if name.startswith("pr tier"):
        status, step = golden_verdict(tiered, runs, fail_fast, tier)
    else:
        status, step = golden_verdict(baseline, runs, fail_fast, full)
    return status, step, len(runs) * training_share(step)[1]


if __name__ == "__main__":
    sys.exit(main())
