"""This bisect against ``git bisect run`` with one run per probe, on the same 16-commit repository over several seeds.

The repository is the one of tests/integration/bisect/test_bisect.py (the embedded GRPO workload as a framework;
one commit cuts the learning rate to a quarter, one changes it by x0.97, below the gates' MDE, one does not run).
For each seed S:

- **this bisect**: ``rl-autotest bisect`` (``autotest.bisect.session.bisect``) with P = 2 probes a round, each
  probe's first run at seed S, grey-zone probes confirmed by 3 more seeds;
- **git bisect run**: ``git bisect start main GOOD`` then ``git bisect run`` of a script that makes one run of the
  checked-out commit at seed S and answers from the same accuracy gates (exit 0 good, 1 bad, 125 skip).

Printed: per seed and method, whether the right commit was named, runs and rounds (git bisect: one probe a round),
then a markdown table of the totals. Usage: python benchmarks/bench_bisect.py [--seeds 0,1,2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autotest.bisect.session import FOUND, BisectOptions, bisect  # noqa: E402
from autotest.inputs.case import load_case  # noqa: E402
from autotest.run.framework import CACHE_ENV, REF_ENV, REPO_ENV  # noqa: E402
from tests.integration.bisect.test_bisect import build_framework  # noqa: E402

#: the git bisect run script: one run of HEAD at the seed, answered from the accuracy gates like a probe's
PROBE = """
import sys
from pathlib import Path
from autotest.bisect.probe import answer_of
from autotest.inputs.case import load_case
from autotest.pipeline import JudgeOptions, LaunchOptions, PublishOptions, RunOptions, run_case
case_file, repo, results, seed = sys.argv[1:5]
import subprocess
sha = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
try:
    run = run_case(load_case(Path(case_file)), RunOptions(
        LaunchOptions(results_root=Path(results), seed=int(seed), framework_repo=repo, framework_ref=sha),
        JudgeOptions(purpose="bisect"), PublishOptions(with_plots=False, step_summary=False)))
    answer, _ = answer_of(run.verdict)
except Exception as exc:
    print(exc)
    answer = "skipped"
with open(Path(results) / "probes.log", "a") as log:
    log.write(f"{sha} {answer}\\n")
sys.exit({"good": 0, "bad": 1}.get(answer, 125))
"""


def git_bisect(repo: Path, good: str, case_file: Path, results: Path, seed: int) -> tuple[str | None, int]:
    """(the commit git bisect names, runs made)."""
    results.mkdir(parents=True)
    script = results / "probe.py"
    script.write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x"}
    # the probe checks its commit out of the repository by sha; git bisect moves the repository's HEAD
    subprocess.run(["git", "-C", str(repo), "bisect", "start", "main", good], check=True, capture_output=True, env=env)
    try:
        done = subprocess.run(["git", "-C", str(repo), "bisect", "run", sys.executable, str(script), str(case_file),
                               str(repo), str(results), str(seed)], capture_output=True, text=True, env=env)
        named = None
        for line in done.stdout.splitlines():
            if line.endswith("is the first bad commit"):
                named = line.split()[0]
        runs = len((results / "probes.log").read_text().splitlines()) if (results / "probes.log").exists() else 0
        return named, runs
    finally:
        subprocess.run(["git", "-C", str(repo), "bisect", "reset", "main"], capture_output=True, env=env)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default: 0,1,2)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    totals = {"this bisect (P = 2)": [0, 0, 0, 0.0], "git bisect run, one run per probe": [0, 0, 0, 0.0]}
    t_all = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-bisect-") as tmp:
        root = Path(tmp)
        repo, commits, culprit = build_framework(root)
        os.environ[CACHE_ENV] = str(root / "cache")
        for name in (REPO_ENV, REF_ENV, "TINYFW_ENV_FAULT"):
            os.environ.pop(name, None)
        case = load_case(root / "tinyfw.yaml")
        for seed in seeds:
            t0 = time.monotonic()
            outcome = bisect(case, BisectOptions(good=commits[0], bad="main", slots=2, seed=seed,
                                                 results_root=root / f"ours-{seed}"))
            right = outcome.status == FOUND and outcome.first_bad is not None and outcome.first_bad.sha == culprit
            row = totals["this bisect (P = 2)"]
            row[0] += right
            row[1] += outcome.runs
            row[2] += outcome.rounds + 1  # the ends are a round too
            row[3] += time.monotonic() - t0
            print(f"seed {seed}: this bisect: {'right' if right else 'WRONG'} ({outcome.status}, "
                  f"{(outcome.first_bad.sha[:12] if outcome.first_bad else '-')}), {outcome.runs} runs, "
                  f"{outcome.rounds + 1} rounds, {time.monotonic() - t0:.0f} s", flush=True)
            t0 = time.monotonic()
            named, runs = git_bisect(repo, commits[0], root / "tinyfw.yaml", root / f"git-{seed}", seed)
            row = totals["git bisect run, one run per probe"]
            row[0] += named == culprit
            row[1] += runs
            row[2] += runs
            row[3] += time.monotonic() - t0
            print(f"seed {seed}: git bisect run: {'right' if named == culprit else 'WRONG'} "
                  f"({(named or '-')[:12]}), {runs} runs, {runs} rounds, {time.monotonic() - t0:.0f} s", flush=True)
    n = len(seeds)
    print(f"\n{n} seed(s), 16 commits, culprit {culprit[:12]}; {time.monotonic() - t_all:.0f} s in all; "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("| method | right commit | runs per bisect | rounds per bisect | wall per bisect |")
    print("|---|---|---|---|---|")
    for method, (right, runs, rounds, wall) in totals.items():
        print(f"| {method} | {right}/{n} | {runs / n:.1f} | {rounds / n:.1f} | {wall / n:.0f} s |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
