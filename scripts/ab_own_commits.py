"""A project A/B-ing its own commits, end to end: the flow docs/ab.md shows, on a real two-commit git repository.

    .venv/bin/python scripts/ab_own_commits.py [FOLDER]   # builds FOLDER/mini (default: a temporary folder) and
                                                          # prints each command with what it printed

The project ``mini`` is its own framework: its case names ``platform.framework: {name: mini, env: MINI_ROOT}`` and
launches ``train.py`` in ``${MINI_ROOT}``. Its trainer is the embedded tiny GRPO workload at a learning rate of its
own, 20 steps, on ``main``; a branch ``halve-lr`` halves that rate in one commit. The commands, run from the
project root (on ``main``) with MINI_ROOT set to it: the golden (``calibrate --promote``), the paired noise
(``calibrate --paired --promote``: A/A pairs, the second run nudged by the harness, ``optimizer-ulp:1``, since the
trainer reads no nudge of its own), then ``ab --base main --head halve-lr``. tests/integration/test_ab_own_commits.py runs it; scripts/doc_samples.py takes docs/ab.md's sample from it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASE = """\
name: mini
description: the project's own trainer (train.py) at the commit under test
markers: [grpo]
goal: a commit keeps training as its base did
minimal_scale: one CPU process, 20 GRPO steps
platform:
  gpus: 0
  framework: {name: mini, env: MINI_ROOT}   # the project is its own framework: ab --base/--head check out its commits
launch:
  command: ["{python}", train.py, --work-dir, "{work_dir}", --seed, "{seed}"]
  cwd: ${MINI_ROOT}                          # the checkout of the commit under test
  timeout_s: 300
tracker: {format: xtuner, work_dir_env: WORK_DIR}
expected: {steps: 20, exact_steps: true}
seed: {default: 3, calibration: [0, 1, 2]}
"""

TRAIN = """\
\"\"\"The project's trainer: the tiny GRPO workload for 20 steps at this commit's learning rate.\"\"\"
import runpy
import sys

LEARNING_RATE = {lr}

sys.argv = ["train.py", *sys.argv[1:], "--steps", "20", "--lr", str(LEARNING_RATE)]
runpy.run_module("autotest.workloads.grpo", run_name="__main__")
"""

#: the checks the golden is calibrated for (the golden values and thresholds come from `calibrate`)
BASELINE = """\
name: mini
golden: {table: {}}
checks:
  - {metric: response/rewards/mean, method: absolute, operator: "<", threshold: placeholder, scope: pooled}
  - {metric: response/response_len/mean, method: absolute, operator: "<", threshold: placeholder, scope: pooled}
"""

PYPROJECT = """\
[project]
name = "mini"
version = "0"

[tool.rl-autotest]
cases = ["accuracy/cases"]
baselines = "accuracy/baselines"
results = "accuracy/results"
"""

#: what the docs show, in order (``rl-autotest`` is ``python -m autotest.cli`` here)
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("calibrate", "mini", "--runs", "3", "--jobs", "1", "--promote"),  # one at a time: the lines in a fixed order
    ("calibrate", "mini", "--paired", "--runs", "2", "--promote"),
    ("ab", "mini", "--base", "main", "--head", "halve-lr", "--seeds", "11", "--no-plots"),
)
_GIT = {"GIT_AUTHOR_NAME": "mini", "GIT_AUTHOR_EMAIL": "mini@example.com", "GIT_COMMITTER_NAME": "mini",
        "GIT_COMMITTER_EMAIL": "mini@example.com"}


def make_project(folder: Path) -> Path:
    """``folder/mini``: a git repository of two commits, the second halving the trainer's learning rate."""
    root = folder / "mini"
    (root / "accuracy" / "cases").mkdir(parents=True)
    (root / "accuracy" / "baselines").mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / ".gitignore").write_text("accuracy/results/\n")
    (root / "accuracy" / "cases" / "mini.yaml").write_text(CASE)
    (root / "accuracy" / "baselines" / "mini.yaml").write_text(BASELINE)
    env = {**os.environ, **_GIT}

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(root), *args], check=True, env=env, capture_output=True)

    git("init", "-q", "-b", "main")
    for lr, message, branch in (("4e-3", "mini trainer", "main"), ("2e-3", "halve the learning rate", "halve-lr")):
        if branch != "main":
            git("checkout", "-q", "-b", branch)
        (root / "train.py").write_text(TRAIN.format(lr=lr))
        git("add", ".")
        git("commit", "-q", "-m", message)
    git("checkout", "-q", "main")
    return root


def run_flow(root: Path, runner: Callable[..., subprocess.CompletedProcess] = subprocess.run
             ) -> list[tuple[tuple[str, ...], subprocess.CompletedProcess]]:
    """Each of :data:`COMMANDS` in ``root`` with MINI_ROOT set to it, by ``runner`` (``subprocess.run``'s
    signature; a test passes its own-time wait); stops after the first that exits 2."""
    env = {**os.environ, "MINI_ROOT": str(root), "RL_AUTOTEST_FRAMEWORK_CACHE": str(root.parent / "framework-cache")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    for name in ("RL_AUTOTEST_RESULTS", "RL_AUTOTEST_PROJECT", "RL_AUTOTEST_HISTORY"):
        env.pop(name, None)
    done = []
    for args in COMMANDS:
        ran = runner([sys.executable, "-m", "autotest.cli", *args], cwd=root, env=env, capture_output=True,
                     text=True)
        done.append((args, ran))
        if ran.returncode == 2:
            break
    return done


def transcript(root: Path, done: list[tuple[tuple[str, ...], subprocess.CompletedProcess]]) -> str:
    """The commands and what they printed, as a reader would see them (the project's path as ``mini/``)."""
    lines = ["export MINI_ROOT=$PWD   # in the project's root"]
    for args, ran in done:
        lines.append(f"$ rl-autotest {' '.join(args)}")
        lines += [line for line in (ran.stdout + ran.stderr).splitlines() if line.strip()]
    text = "\n".join(lines).replace(f"{root.parent}/", "")
    return re.sub(r"framework-cache/mini-[0-9a-f]+/commits/([0-9a-f]{12})[0-9a-f]*", r"<cache>/\1", text)


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(argv[0]) if argv else Path(scratch)
        root = make_project(folder)
        done = run_flow(root)
        print(transcript(root, done))
        return max(ran.returncode for _, ran in done)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
