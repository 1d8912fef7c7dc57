"""Case files: what to run, on what, with which inputs, and what a complete run looks like.

One YAML file per case in ``autotest/cases/<name>.yaml``, loaded into frozen dataclasses and
validated on load. Every mistake is a ``UsageError("<file>: <dotted.key>: <problem>; <what to
do>")``; an unknown key is an error (a typo must not pass silently), and so is a duplicate key.

Schema::

    name: str              the case name; equals the file name without .yaml
    description: str       one line for listings and reports
    markers: [str]         pytest markers: grpo, mopd, gpu, calibration; 'gpu' exactly when
                           platform.gpus > 0
    goal: str              目标: what the run verifies (experiment card)
    minimal_scale: str     最小规模: the smallest setup that still answers the goal
    platform:
      gpus: int            GPUs needed here; 0 = CPU is enough
      framework:           the framework checkout the run needs; null for embedded workloads
        name: str          e.g. xtuner
        env: str           env var holding the checkout's path, e.g. XTUNER_ROOT; when the harness
                           checks the framework out it sets this variable to the checkout
        repo: str          repository to fetch (URL or local path, ${ENV} allowed; optional)
        ref: str           ref to test (branch, tag, sha, refs/pull/N/head; optional); both are
                           overridden by --framework-repo/--framework-ref and RL_AUTOTEST_FRAMEWORK_*
      python_packages: [str]  distributions the harness's Python must have (optional)
      requires: {dist: spec}  distributions the framework's Python must have, with a version
                           specifier, e.g. {lmdeploy: ">=0.9"}; checked before launch (optional)
    inputs: {name: path}   must exist before launch (fail fast); ${ENV} and {repo} allowed
    launch:
      command: [str] | str a list runs as is (no shell); a string runs with `bash -c`
      cwd: str             working directory (default {repo})
      env: {K: V}          overrides on top of the harness's environment
      timeout_s: number    wall-clock limit; the whole process group is killed after it
      term_grace_s: number between SIGTERM and SIGKILL (default 10; give a script's own
                           EXIT trap time to stop its servers)
      python: str          the framework environment's interpreter (path, or a name looked up on PATH
                           without the harness venv; ${ENV} allowed; $FRAMEWORK_PYTHON overrides it):
                           its folder goes first on the run's PATH, so `python` and `ray` in the
                           launch script are the node's, never the harness's; ${FRAMEWORK_PYTHON}
                           in launch fields is that interpreter (optional; default: PATH as is)
      uses_ray: bool       the run starts a Ray cluster of its own: it gets free RAY_HEAD_PORT /
                           RAY_DASHBOARD_PORT and a RAY_TMPDIR per run, and only that cluster is
                           stopped after it (autotest.run.isolation; default false)
      fault_args: [str]    appended when the harness injects a fault; must contain {fault}
    tracker:
      format: str          the metric log's format, a name in autotest.readers.registry (xtuner, verl,
                           hf-trainer, tensorboard, mlflow, wandb, console, or a plugin's; docs/readers.md):
                           tensorboard: the event files under the exp dir's logs/ or below the work
                           folder; hf-trainer: a Hugging Face trainer_state.json or a TrainerCallback's JSONL
      pattern: str         console only: a preset (verl, megatron) or a regex with a named group step and
                           one named group per metric; checked when the case loads
      work_dir_env: str|null  env var set to the run's work folder (default WORK_DIR); null when
                           the launch script picks its own folder
      work_dir: str        where the timestamped exp dirs appear when not in the work folder
      path: str            explicit tracker file; replaces the exp-dir search
    recipe:                optional: the framework config the run resolves, held to the case before launch
                           (autotest.inputs.case_recipe, autotest.run.recipe_guard; needs platform.framework)
      config: str          the config file (${ENV} and {repo} allowed), loaded in the framework's Python
      train_batch_size: int, eval_interval: int, initial_eval: bool, teacher_replicas: int,
      teacher_workers: int   each optional: the value the resolved config must have; expected.steps and
                           tracker.format are held too (a tracker the harness reads is followed)
    expected:
      steps: int           the training step the run must reach
      exact_steps: bool    and not pass (default true: the shape is part of the contract)
      wall_time_s: number  expected wall time (optional); below launch.timeout_s
    baseline: str          golden baseline, relative to the repo: baselines/<name>.yaml
    seed:                  optional
      default: int         seed of a normal run (default 0); not one of calibration's
      calibration: [int]   seeds of calibration runs; empty = repeat the default seed
      env: str             also export the seed in this env var
    consistency:
      policy: off|on-breach|always   when to run the consistency dump job (default off)
    resume:                optional: the resume phase (autotest.inputs.resume_phase; docs/cases.md)
      at_step: int         the main run saves a checkpoint after this step (< expected.steps)
      steps: int           the resumed run trains at_step+1 .. at_step+steps (<= expected.steps)
      checkpoint_args: [str]  appended to the main launch; must use {checkpoint_dir}
      resume_args: [str]   appended to the resumed launch; must use {checkpoint_dir}
      match: bitwise|noise every compared metric equal, or within noise_ratio of golden.noise
      noise_ratio: number  match: noise only (default 0.5)
      roles: {metric: role}  roles of logged metrics the baseline does not check
      timeout_s: number    the resumed launch's limit (default launch.timeout_s)
    equivalence:           optional: variants that must train as the case does (autotest.inputs.case_variants)
    replay:                optional: frozen-rollout replay (autotest.inputs.case_replay; docs/ab.md)
      save_args: [str]     appended to a run that keeps its rollout batches in {rollouts_dir}
      replay_args: [str]   appended to a run that trains on the batches kept in {rollouts_dir}
    replicates: int        seeds run per verdict (default 1); the checks judge their mean, pooled
                           thresholds scaled to keep the calibrated false-alarm rate
                           (autotest.judge.replicate_mean); `--replicates K` overrides it; at most
                           the platform's cap (autotest.inputs.replicate_limits), and > 1 only when
                           the launch takes the seed
    node:                  optional: what the launch script assumes of the node, checked before launch
                           (autotest.inputs.case_node; docs/gpu-runners.md "Node preconditions")
      open_files: int      the hard open-file limit the script raises to (`ulimit -n N` under `set -e`)
      executables: [str]   commands it calls bare: on the run's PATH, in the framework Python's environment
      owned_paths: [str]   node-wide paths it deletes or re-links: absent or the runner user's
      exclusive_ray: bool  it stops (and may join) any Ray cluster of its user: none may be running
      whole_node: bool     it uses absolute GPU ordinals: the run's GPU slot must be the whole node
    tiers:                 optional: shorter runs of the case, by name (autotest.inputs.case_tiers; docs/cases.md)
      NAME:
        steps: int         the steps it trains (1..expected.steps - 1), judged on the gates they hold
        args: [str]        appended to launch.command so the workload stops after them
    shadow: bool           optional (default false): every gate of the baseline is a shadow gate, judged and
                           recorded, never failing the run (autotest.judge.shadow; docs/cases.md)
    framework_spec:        optional: the framework's own accuracy spec for the case, read at the commit under
                           test (autotest.inputs.case_framework_spec; docs/gpu-runners.md)
      path: str            the spec file in the framework's repository, e.g. autotest/config.yaml
      case: str            the case's name in it, e.g. qwen3-rl-lmdeploy
      mode: follow|own     follow: its environment is set and its checks gate; own: the baseline gates;
                           either way the verdict names each difference
      phase: str           the spec case's step when it has several (optional)

Substitutions, done when a run is resolved (not on load, so listing cases needs no share):
``${NAME}`` is the harness's environment variable NAME (unset: a UsageError naming file, key
and variable); ``{python}`` sys.executable, ``{repo}`` the repo root, ``{work_dir}`` the run's
work folder, ``{seed}``, ``{fault}`` (empty when none); in the resume arguments also ``{checkpoint_dir}``,
``{resume_step}`` and ``{resume_last_step}``. Inputs take ${ENV} and {repo} only;
cwd and tracker paths also {work_dir}. In a string command substituted values are shell-quoted
when needed (keep placeholders outside quotes); ``$NAME`` without braces is left to bash.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from autotest.errors import UsageError
from autotest.inputs.case_model import CASES_DIR, TRACKER_FORMATS, Case
from autotest.inputs.case_sections import parse_case
from autotest.inputs.placeholders import REPO_ROOT
from autotest.inputs.project import Project, find_project

# Case, REPO_ROOT, CASES_DIR and TRACKER_FORMATS are imported from here across the harness and its tests
__all__ = ["CASES_DIR", "REPO_ROOT", "TRACKER_FORMATS", "Case", "case_argument", "case_files", "case_folders",
           "list_cases", "load_case"]


def case_files(directory: Path) -> list[Path]:
    return sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")])


def case_folders(project: Project | None = None, *, packaged: bool = False) -> tuple[Path, ...]:
    """Where case names are looked up: the project's case folders (and the packaged demo cases when
    asked), else the packaged ones."""
    if project is None:
        return (CASES_DIR,)
    return (*project.cases, CASES_DIR) if packaged else project.cases


def list_cases(directory: Path | None = None, *, packaged: bool = False) -> list[Case]:
    """Every case in ``directory``, else the project's cases (plus the packaged demo ones when
    ``packaged``), else the packaged cases; sorted by name."""
    if directory is not None:
        return [load_case(p) for p in case_files(directory)]
    found = _named_files(find_project(), packaged=packaged)
    return [load_case(found[name]) for name in sorted(found)]


def _named_files(project: Project | None, *, packaged: bool) -> dict[str, Path]:
    """name -> case file over the case folders; one name in two folders is an error."""
    found: dict[str, Path] = {}
    for folder in case_folders(project, packaged=packaged):
        for path in case_files(folder):
            if path.stem in found:
                where = "project and package" if folder == CASES_DIR else "two case folders"
                raise UsageError(f"{path}: case {path.stem!r} is also {found[path.stem]} ({where}); "
                                 "rename one of them")
            found[path.stem] = path
    return found


def load_case(name_or_path: str | Path) -> Case:
    """Load a case by name (the project's cases, then the packaged ones) or by path to its YAML file."""
    text = str(name_or_path)
    if not text.strip():
        raise UsageError("case: the name is empty; give a case name or a case file")
    if isinstance(name_or_path, Path) or text.endswith((".yaml", ".yml")) or "/" in text:
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            raise UsageError(f"{path}: no such case file; check the path")
    else:
        project = find_project()
        found = _named_files(project, packaged=True)
        if text not in found:
            folders = ", ".join(str(f) for f in case_folders(project, packaged=True))
            known = ", ".join(sorted(found)) or "none"
            raise UsageError(f"{text}: no such case; known cases: {known} (files in {folders})")
        path = found[text]
    return parse_case(path, _owner(path))


def case_argument(case: Case) -> str:
    """How to name ``case`` on a printed command line: its name where that finds this very file from the
    working directory, else its path."""
    try:
        by_name = _named_files(find_project(), packaged=True).get(case.name)
    except UsageError:
        by_name = None
    if by_name is not None and by_name.resolve() == case.source.resolve():
        return case.name
    return shlex.quote(str(case.source.resolve()))


def _owner(path: Path) -> Project | None:
    """The project a case file belongs to (None: a packaged case, or a file outside any project)."""
    resolved = path.resolve()
    if resolved.parent == CASES_DIR:
        return None
    project = find_project(resolved.parent)
    return project if project is not None and project.contains(resolved) else None
