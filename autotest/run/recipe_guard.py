"""Before launch: the framework config the run will resolve, held against the case (``recipe:``).

xtuner's recipe configs are Python files ending in ``trainer = RLColocateTrainerConfig(...)``. The guard runs
the case's ``recipe.config`` in the framework's Python, with the launch's working directory and environment,
takes its ``trainer`` and reads the fields the case holds it to: the train batch size, the total steps, the eval
interval, the initial eval, each teacher's replicas and workers, and the tracker. Defaults, variables read from
the environment and commented-out lines resolve as they will in the run, which a text search cannot tell.

Each field that differs is one ERROR line before any GPU time is spent, naming the config's value, the case's
and the fix. The tracker is the exception: when the config resolves to a log the harness has a reader for
(``jsonl`` → the xtuner reader, ``tensorboard`` → the TensorBoard reader), the run's log is read that way and
the verdict says so; only a log nobody reads is an ERROR.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from autotest.errors import UsageError
from autotest.inputs.case import Case
from autotest.inputs.placeholders import expand, placeholder_values
from autotest.run.isolation import PYTHON_ENV, resolve_python

#: xtuner's trainer config: where each held value lives (the first path that resolves wins; ``[]``: each item).
#: The distillation trainer field was ``opd_config`` in pull request #1977 up to c77eddc9 and
#: ``distillation_config`` from 0eea4a92 on: both are read.
XTUNER_TRAINER: dict[str, tuple[str, ...]] = {
    "tracker": ("exp_tracker",),
    "total_steps": ("total_train_steps",),
    "train_batch_size": ("train_batch_size",),
    "eval_interval": ("evaluate_step",),
    "initial_eval": ("enable_initial_evaluate",),
    "teacher_replicas": ("distillation_config.teachers[].num_replicas", "opd_config.teachers[].num_replicas"),
    "teacher_workers": ("distillation_config.teachers[].launch_config.num_workers",
                        "opd_config.teachers[].launch_config.num_workers"),
    "teacher_names": ("distillation_config.teachers[].name", "opd_config.teachers[].name"),
}
PRESETS = {"xtuner": XTUNER_TRAINER}
#: xtuner's default exp_tracker, logged by a trainer config that leaves the field out
DEFAULT_TRACKER = "tensorboard"
#: what the config's tracker resolves to -> the reader format the harness reads that log with
FORMAT_OF_TRACKER = {"jsonl": "xtuner", "tensorboard": "tensorboard"}
#: loading a recipe imports the framework (torch, transformers): slow on a cold node, never minutes
PROBE_TIMEOUT_S = 300.0
_MARK = "rl-autotest-recipe: "
# Runs in the framework's Python: standard library only, prints one marked JSON line.
_PROBE = f"""
import enum, json, runpy, sys
MISSING = object()
def field(obj, name):
    if isinstance(obj, dict):
        return obj.get(name, MISSING)
    return getattr(obj, name, MISSING)
def walk(obj, parts):
    if not parts:
        return obj
    name, each = parts[0].removesuffix("[]"), parts[0].endswith("[]")
    value = field(obj, name)
    if value is MISSING or value is None and len(parts) > 1:
        return MISSING
    if each:
        if not isinstance(value, (list, tuple)):
            return MISSING
        return [None if v is MISSING else v for v in (walk(item, parts[1:]) for item in value)]
    return walk(value, parts[1:])
def plain(value):
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)
namespace = runpy.run_path(sys.argv[1], run_name="__rl_autotest_config__")
trainer = namespace.get("trainer")
if trainer is None:
    found = {{"problem": "defines no `trainer`"}}
else:
    values = {{}}
    for key, paths in json.loads(sys.argv[2]).items():
        for path in paths:
            value = walk(trainer, path.split("."))
            if value is not MISSING:
                values[key] = {{"path": path, "value": plain(value)}}
                break
    found = {{"trainer": type(trainer).__name__, "values": values}}
print({_MARK!r} + json.dumps(found))
"""


def resolve_config(config: Path, python: str, cwd: Path, env: Mapping[str, str],
                   fields: Mapping[str, tuple[str, ...]]) -> dict[str, dict[str, Any]]:
    """``{key: {"path", "value"}}`` for each of ``fields`` that ``config``'s ``trainer`` defines, loaded in
    ``python``; a UsageError says why it could not be read."""
    # the launch scripts put the checkout on PYTHONPATH (run_rl.sh: `export PYTHONPATH=$(pwd):$PYTHONPATH`)
    pythonpath = os.pathsep.join(p for p in (str(cwd), env.get("PYTHONPATH", "")) if p)
    try:
        done = subprocess.run([python, "-c", _PROBE, str(config), json.dumps(fields)], cwd=cwd, capture_output=True,
                              text=True, env={**env, "PYTHONPATH": pythonpath}, timeout=PROBE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise UsageError(f"{config}: loading the config in {python} took over {PROBE_TIMEOUT_S:g} s; "
                         "is the framework's environment reachable?") from None
    lines = [line for line in done.stdout.splitlines() if line.startswith(_MARK)]
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise UsageError(f"{config}: cannot be loaded in {python} to see what the run will do ({last}); "
                         f"fix the config or point {PYTHON_ENV} at the framework's python")
    found = json.loads(lines[-1][len(_MARK):])
    if "problem" in found:
        raise UsageError(f"{config}: {found['problem']}, so what the run will do is unknown; "
                         "name the trainer config `trainer`, as xtuner's recipes do")
    return found["values"]


@dataclass(frozen=True)
class GuardResult:
    """What the guard found: ERROR lines, the log format the run is read as, and notes for the verdict."""

    problems: tuple[str, ...] = ()
    #: the reader format the run's log is read with when the config resolves another one than the case's
    tracker_format: str | None = None
    notes: tuple[str, ...] = ()
    #: what the config resolved, per held key (results.json)
    resolved: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def held_values(case: Case) -> dict[str, Any]:
    """What the case holds its config to: its ``recipe:`` keys, ``expected.steps`` and ``tracker.format``."""
    assert case.recipe is not None
    return {"tracker": case.tracker.format, "total_steps": case.expected.steps, **case.recipe.held}


def _where(key: str) -> str:
    return {"tracker": "tracker.format", "total_steps": "expected.steps"}.get(key, f"recipe.{key}")


def compare(case: Case, config: Path, resolved: Mapping[str, Mapping[str, Any]],
            fields: Mapping[str, tuple[str, ...]] = XTUNER_TRAINER) -> GuardResult:
    """Each held value against the config's: one ERROR line per field that differs (pure: no process)."""
    problems, notes, follow = [], [], None
    names = (resolved.get("teacher_names") or {}).get("value")
    for key, want in held_values(case).items():
        where = f"{case.source}: {_where(key)}"
        got = resolved.get(key)
        paths = " or ".join(f"trainer.{p}" for p in fields[key])
        if key == "tracker":
            value = got["value"] if got and got["value"] is not None else DEFAULT_TRACKER
            reads = FORMAT_OF_TRACKER.get(str(value))
            if reads == want:
                continue
            if reads is not None and case.tracker.path is None:
                follow = reads
                notes.append(f"{config}: trainer.exp_tracker resolves to {value!r}: the run's log is read with the "
                             f"{reads} reader, not as {where} {want!r} says")
                continue
            fix = (f"set exp_tracker to one of {', '.join(map(repr, FORMAT_OF_TRACKER))} in the config's trainer"
                   if reads is None else f"drop tracker.path or set exp_tracker={_tracker_of(want)!r}")
            problems.append(f"{config}: trainer.exp_tracker resolves to {value!r} but {where} is {want!r}; {fix}")
            continue
        if got is None:
            problems.append(f"{config}: the trainer has no {paths}, so {where} ({want!r}) cannot be held; fix the "
                            f"config or remove {_where(key)} from the case")
            continue
        value = got["value"]
        if isinstance(value, list):  # one per teacher
            wrong = [(names[i] if isinstance(names, list) and i < len(names) else f"teacher {i}", v)
                     for i, v in enumerate(value) if v != want]
            if not value:
                problems.append(f"{config}: trainer.{got['path']} lists no teachers but {where} is {want!r}; "
                                "fix the config or remove the key from the case")
            elif wrong:
                shown = ", ".join(f"{name} {v!r}" for name, v in wrong)
                problems.append(f"{config}: trainer.{got['path']} resolves to {shown} but {where} is {want!r}; "
                                f"{_fix(key)}")
            continue
        if value != want or type(value) is not type(want):
            problems.append(f"{config}: trainer.{got['path']} resolves to {value!r} but {where} is {want!r}; "
                            f"{_fix(key)}")
    return GuardResult(tuple(problems), follow, tuple(notes), dict(resolved))


def _tracker_of(fmt: str) -> str | None:
    return next((t for t, f in FORMAT_OF_TRACKER.items() if f == fmt), None)


def _fix(key: str) -> str:
    """The fix of a field that differs: the config follows the case, or the case (and its baseline) the config."""
    return (f"make the config resolve the case's value (the file, or an environment variable it reads and the "
            f"case sets) or change {_where(key)} and recalibrate the baseline at the config's")


def hold_recipe(case: Case, cwd: Path, run_env: Mapping[str, str]) -> GuardResult:
    """The case's ``recipe:`` held against its config, resolved in the framework's Python (nothing when the case
    has no ``recipe:``).

    ``run_env`` is the launched command's full environment (the share and checkout variables, WORK_DIR,
    FRAMEWORK_PYTHON, TOTAL_TRAIN_STEPS and the like), so the config resolves as in the run.
    """
    if case.recipe is None:
        return GuardResult()
    key = f"{case.source}: recipe.config"
    fw = case.platform.framework
    fields = PRESETS.get(fw.name) if fw is not None else None
    if fields is None:
        return GuardResult((f"{key}: the harness knows the trainer config of {', '.join(PRESETS)} only, and the case's "
                            f"framework is {fw.name if fw else 'none'!r}; remove recipe from the case",))
    try:
        config = case.resolve(expand(case, "recipe.config", case.recipe.config,
                                     placeholder_values(repo=case.repo_root), run_env))
        if not config.is_file():
            raise UsageError(f"{key}: {config} does not exist; fix the path or the framework ref")
        python = run_env.get(PYTHON_ENV) or str(resolve_python("python3", key, run_env))
        resolved = resolve_config(config, python, cwd, run_env, fields)
    except UsageError as exc:
        return GuardResult((str(exc),))
    return compare(case, config, resolved, fields)
