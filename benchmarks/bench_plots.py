"""Time the 7 plots of a tiny-grpo report (target <= 1 s).

    python benchmarks/bench_plots.py [--repeats 3]

The verdict is a tiny-grpo FAIL judged against the committed baseline (a 45-step tracker built from its golden
table, ``tests.helpers.tiny_grpo_tracker``), so the plots are the ones a tiny-grpo report carries: 7 metrics,
every kind of band, breach markers. Each repeat is a fresh process, as ``rl-autotest compare`` is: "first" is
the first ``plot_checks`` of the process, matplotlib's import included (what one compare pays), "again" a second
call in the same process (what each further case of a pytest session pays). Two set-ups: drawn alone
(``RL_AUTOTEST_PLOT_WORKER=0``), and with the plot worker started ahead and ready, as during a run
(``rl-autotest run`` and the pytest plugin start it when the run starts, where a core is idle). Wall and CPU
seconds of this process (the worker's CPU is not in it); the median of the repeats is printed with the load
average beside it (the figures move with the machine's load). It asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: run in a fresh interpreter: compare first (not timed), then the plots twice
CHILD = """
import json, sys, time
from pathlib import Path
from autotest.inputs.baseline import load_baseline
from autotest.readers.reading import read_trace
from autotest.judge.verdict import compare
from tests.helpers import FROZEN_TINY_GRPO_BASELINE, tiny_grpo_tracker

folder = Path(sys.argv[1])
comparison = compare(load_baseline(FROZEN_TINY_GRPO_BASELINE),
                     read_trace(tiny_grpo_tracker(folder / "tracker.jsonl")))
from autotest.report import plot_worker
from autotest.report.plot_worker import plot_checks

worker = plot_worker.prepare()
assert worker is None or worker.wait_ready(120), "the plot worker never became ready"
assert "matplotlib" not in sys.modules, "matplotlib was imported before the plots were drawn"

timings = []
for attempt in ("first", "again"):
    wall, cpu = time.perf_counter(), time.process_time()
    written = plot_checks(comparison.verdict, comparison.golden, comparison.current, folder / attempt)
    timings.append({"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
                    "plots": len(written)})
print(json.dumps({"status": comparison.verdict.status, "timings": timings}))
"""


def run_once(folder: Path, worker: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "RL_AUTOTEST_PLOT_WORKER": "1" if worker else "0"}
    done = subprocess.run([sys.executable, "-c", CHILD, str(folder)], env=env, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs: dict[bool, list[dict]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):  # interleaved: both set-ups see the same load
            for worker in (False, True):
                runs[worker].append(run_once(Path(tmp) / f"{repeat}-{worker}", worker))
    load = os.getloadavg()[0]
    for worker, label in ((False, "drawn alone"), (True, "with the plot worker ready")):
        plots = runs[worker][0]["timings"][0]["plots"]
        for index, attempt in enumerate(("first", "again")):
            wall = statistics.median(run["timings"][index]["wall_s"] for run in runs[worker])
            cpu = statistics.median(run["timings"][index]["cpu_s"] for run in runs[worker])
            every = ", ".join(f"{run['timings'][index]['wall_s']:.2f}" for run in runs[worker])
            print(f"tiny-grpo report, {plots} plots, {label} ({attempt} in the process"
                  f"{', matplotlib import included' if attempt == 'first' else ''}): {wall:.2f} s wall "
                  f"({cpu:.2f} s CPU), median of {len(runs[worker])} [{every}], load {load:.1f}")
    print(f"verdict {runs[False][0]['status']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
