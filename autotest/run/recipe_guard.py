"""Before launch: what the framework's config will make the run log, resolved as the run resolves it.

xtuner's recipe configs are Python files ending in ``trainer = RLColocateTrainerConfig(...)``; its
``exp_tracker`` (default ``tensorboard``; ``jsonl`` writes tracker.jsonl) decides which metric log the
run writes. The guard runs the config file in the framework's Python, with the launch's working
directory and environment, takes its ``trainer`` and reads ``exp_tracker``. A default, a variable or
a commented-out line resolve as they will in the run, which a text search cannot tell. A config that
logs another format than the case reads is one ERROR line before any GPU time is spent.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from autotest.errors import UsageError
from autotest.inputs.case import Case
from autotest.inputs.placeholders import expand, placeholder_values
from autotest.run.isolation import PYTHON_ENV, resolve_python

#: the tracker format the harness reads -> the exp_tracker value that makes xtuner write it
EXP_TRACKER_OF_FORMAT = {"xtuner": "jsonl", "tensorboard": "tensorboard"}
#: loading a recipe imports the framework (torch, transformers): slow on a cold node, never minutes
PROBE_TIMEOUT_S = 300.0
_MARK = "rl-autotest-exp-tracker: "
# Runs in the framework's Python: standard library only, prints one marked JSON line.
_PROBE = f"""
import enum, json, runpy, sys
namespace = runpy.run_path(sys.argv[1], run_name="__rl_autotest_config__")
trainer = namespace.get("trainer")
if trainer is None:
    found = {{"problem": "defines no `trainer`"}}
else:
    value = trainer.get("exp_tracker") if isinstance(trainer, dict) else getattr(trainer, "exp_tracker", None)
    if isinstance(value, enum.Enum):
        value = value.value
    found = {{"exp_tracker": None if value is None else str(value), "trainer": type(trainer).__name__}}
print({_MARK!r} + json.dumps(found))
"""


def logged_tracker(config: Path, python: str, cwd: Path, env: Mapping[str, str]) -> str:
    """``trainer.exp_tracker`` of ``config`` loaded in ``python``; a UsageError says why it could not be read."""
    # the launch scripts put the checkout on PYTHONPATH (run_rl.sh: `export PYTHONPATH=$(pwd):$PYTHONPATH`)
    pythonpath = os.pathsep.join(p for p in (str(cwd), env.get("PYTHONPATH", "")) if p)
    try:
        done = subprocess.run([python, "-c", _PROBE, str(config)], cwd=cwd, capture_output=True, text=True,
                              env={**env, "PYTHONPATH": pythonpath}, timeout=PROBE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise UsageError(f"{config}: loading the config in {python} took over {PROBE_TIMEOUT_S:g} s; "
                         "is the framework's environment reachable?") from None
    lines = [line for line in done.stdout.splitlines() if line.startswith(_MARK)]
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise UsageError(f"{config}: cannot be loaded in {python} to see what the run will log ({last}); "
                         f"fix the config or point {PYTHON_ENV} at the framework's python")
    found = json.loads(lines[-1][len(_MARK):])
    if "problem" in found:
        raise UsageError(f"{config}: {found['problem']}, so what the run logs is unknown; "
                         "name the trainer config `trainer`, as xtuner's recipes do")
    # a trainer config without the field logs xtuner's default
    return found["exp_tracker"] or "tensorboard"


def tracker_problem(case: Case, cwd: Path, run_env: Mapping[str, str]) -> str | None:
    """One line when ``case.tracker.config`` will not log the format the case reads; None when it will.

    ``run_env`` is the launched command's full environment (the share and checkout variables, WORK_DIR,
    FRAMEWORK_PYTHON), so the config resolves as in the run.
    """
    raw = case.tracker.config
    if raw is None:
        return None
    key = f"{case.source}: tracker.config"
    try:
        config = case.resolve(expand(case, "tracker.config", raw, placeholder_values(repo=case.repo_root), run_env))
        if not config.is_file():
            raise UsageError(f"{key}: {config} does not exist; fix the path or the framework ref")
        python = run_env.get(PYTHON_ENV) or str(resolve_python("python3", key, run_env))
        logged = logged_tracker(config, python, cwd, run_env)
    except UsageError as exc:
        return str(exc)
    wanted = EXP_TRACKER_OF_FORMAT[case.tracker.format]
    if logged == wanted:
        return None
    return (f"{config}: trainer.exp_tracker resolves to {logged!r} but the case reads tracker.format "
            f"{case.tracker.format!r} (exp_tracker {wanted!r}); set exp_tracker={wanted!r} in the config's "
            f"trainer or change tracker.format in {case.source}")
