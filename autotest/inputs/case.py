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
      format: xtuner|verl|tensorboard|hf-trainer  the metric log's format (tensorboard: the event
                           files under the exp dir's logs/ or below the work folder; hf-trainer: a
                           Hugging Face trainer_state.json or a TrainerCallback's JSONL)
      work_dir_env: str|null  env var set to the run's work folder (default WORK_DIR); null when
                           the launch script picks its own folder
      work_dir: str        where the timestamped exp dirs appear when not in the work folder
      path: str            explicit tracker file; replaces the exp-dir search
      config: str          the framework config whose resolved trainer.exp_tracker decides what the
                           run logs (xtuner formats only); loaded before launch in the framework's
                           Python, a mismatch with format is an ERROR (optional; ${ENV} allowed)
    expected:
      steps: int           the training step the run must reach
      exact_steps: bool    and not pass (default true: the shape is part of the contract)
      wall_time_s: number  expected wall time (optional); below launch.timeout_s
    baseline: str          golden baseline, relative to the repo: baselines/<name>.yaml
    seed:                  optional
      default: int         seed of a normal run (default 0)
      calibration: [int]   seeds of calibration runs; empty = repeat the default seed
      env: str             also export the seed in this env var
    consistency:
      policy: off|on-breach|always   when to run the consistency dump job (default off)
    replicates: int        seeds run per verdict (default 1); the checks judge their mean, pooled
                           thresholds scaled to keep the calibrated false-alarm rate
                           (autotest.judge.replicate_mean); `--replicates K` overrides it; at most
                           the platform's cap (autotest.inputs.replicate_limits), and > 1 only when
                           the launch takes the seed

Substitutions, done when a run is resolved (not on load, so listing cases needs no share):
``${NAME}`` is the harness's environment variable NAME (unset: a UsageError naming file, key
and variable); ``{python}`` sys.executable, ``{repo}`` the repo root, ``{work_dir}`` the run's
work folder, ``{seed}``, ``{fault}`` (empty when none). Inputs take ${ENV} and {repo} only;
cwd and tracker paths also {work_dir}. In a string command substituted values are shell-quoted
when needed (keep placeholders outside quotes); ``$NAME`` without braces is left to bash.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
import shlex
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from autotest.errors import UsageError
from autotest.inputs.placeholders import REPO_ROOT, check_template
from autotest.inputs.project import Project, find_project
from autotest.inputs.replicate_limits import replicates_problem
from autotest.inputs.schema import NAME, Section, load_section

CASES_DIR = REPO_ROOT / "autotest" / "cases"
MARKERS = ("grpo", "mopd", "gpu", "calibration")
TRACKER_FORMATS = ("xtuner", "verl", "tensorboard", "hf-trainer")
#: formats an xtuner trainer config can choose (exp_tracker jsonl / tensorboard)
CONFIG_CHECKED_FORMATS = ("xtuner", "tensorboard")
POLICIES = ("off", "on-breach", "always")
PLACEHOLDERS = ("python", "repo", "work_dir", "seed", "fault")
_INPUT_PLACEHOLDERS = ("repo",)
_PATH_PLACEHOLDERS = ("repo", "work_dir")
_SECONDS = "write a positive number of seconds"



@dataclass(frozen=True)
class Framework:
    name: str
    env: str
    #: the repository the harness fetches the code under test from (None: use the checkout in ``env``)
    repo: str | None = None
    #: the ref to test when neither the command line nor the environment names one
    ref: str | None = None


@dataclass(frozen=True)
class Platform:
    gpus: int
    framework: Framework | None
    python_packages: tuple[str, ...]
    #: distribution -> version specifier the framework's Python must satisfy (checked before launch)
    requires: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Launch:
    command: tuple[str, ...] | str
    cwd: str
    env: dict[str, str]
    timeout_s: float
    term_grace_s: float
    uses_ray: bool
    fault_args: tuple[str, ...]
    #: the framework environment's Python (None: the launched command sees the harness's PATH as is)
    python: str | None = None


@dataclass(frozen=True)
class Tracker:
    format: str
    work_dir_env: str | None
    work_dir: str | None
    path: str | None
    #: the framework config that decides which tracker the run writes (None: not checked)
    config: str | None = None


@dataclass(frozen=True)
class Expected:
    steps: int
    exact_steps: bool
    wall_time_s: float | None


@dataclass(frozen=True)
class Seed:
    default: int
    calibration: tuple[int, ...]
    env: str | None


@dataclass(frozen=True)
class Consistency:
    policy: str
    #: appended to the launch command for a consistency dump re-run; must contain {diagnostic_config}
    diagnostic_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Case:
    name: str
    description: str
    markers: tuple[str, ...]
    goal: str
    minimal_scale: str
    platform: Platform
    inputs: dict[str, str]
    launch: Launch
    tracker: Tracker
    expected: Expected
    baseline: str
    seed: Seed
    consistency: Consistency
    source: Path
    #: seeds run side by side per verdict, judged on their mean (autotest.judge.replicate_mean)
    replicates: int = 1
    #: what ``{repo}`` means and where ``launch.cwd`` starts: the project's root for a project case,
    #: the harness checkout for a packaged (demo) case
    repo_root: Path = REPO_ROOT
    #: the project's framework checkout: the commit under test when the case names no framework env
    framework_checkout: Path | None = None
    #: metric -> the smallest change (metric units) the case's gates must be able to catch
    detect: dict[str, float] = field(default_factory=dict)

    @property
    def packaged(self) -> bool:
        return self.source.resolve().parent == CASES_DIR

    @property
    def baseline_path(self) -> Path:
        """The baseline file: absolute as written, else against the case file's folder (packaged
        demo cases: the harness checkout, where ``baselines/`` lives)."""
        return self.resolve(self.baseline)

    def resolve(self, text: str | Path) -> Path:
        """A path the case file wrote: absolute as written, else against the case file's folder
        (the harness checkout for a packaged demo case)."""
        path = Path(text).expanduser()
        if path.is_absolute():
            return path
        return ((REPO_ROOT if self.packaged else self.source.resolve().parent) / path).resolve()

    @property
    def takes_seed(self) -> bool:
        return self.seed.env is not None or any("{seed}" in t for t in _launch_texts(self.launch))

    @property
    def takes_fault(self) -> bool:
        return any("{fault}" in t for t in _launch_texts(self.launch))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["source"] = str(self.source)
        return data


def _launch_texts(launch: Launch) -> list[str]:
    command = [launch.command] if isinstance(launch.command, str) else list(launch.command)
    return command + list(launch.env.values()) + list(launch.fault_args)


# ---------------------------------------------------------------- loading


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
    return _parse_case(path)


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


def _parse_case(path: Path) -> Case:
    """Read and validate one case file and build the Case."""
    project = _owner(path)
    # a project case may leave its baseline to the project's baselines folder
    needed = ("name", "description", "markers", "goal", "minimal_scale", "platform", "launch", "tracker",
              "expected")
    optional = ("inputs", "seed", "consistency", "replicates", "detect")
    top = load_section(path, what="a case", doc="docs/cases.md", required=needed if project else (*needed, "baseline"),
                       optional=(*optional, "baseline") if project else optional)
    name = top.text("name")
    if name != path.stem:
        top.fail("name", f"{name!r} does not match the file name {path.name!r}",
                 "make them equal")
    markers = _markers(top)
    platform = _platform(top.section("platform"))
    if (platform.gpus > 0) != ("gpu" in markers):
        need = "add 'gpu' to markers" if platform.gpus > 0 else "remove 'gpu' or set platform.gpus"
        top.fail("markers", f"platform.gpus is {platform.gpus} but 'gpu' is "
                 f"{'absent' if platform.gpus > 0 else 'present'}", need)
    inputs = _inputs(top)
    launch = _launch(top.section("launch"))
    tracker = _tracker(top.section("tracker"))
    expected = _expected(top.section("expected"), launch)
    if project is not None and "baseline" not in top.data:
        baseline = str(project.baselines / f"{name}.yaml")
    else:
        baseline = top.text("baseline")
    seed = _seed(top.section("seed", optional=True))
    case = Case(name=name, description=top.text("description"), markers=markers,
                goal=top.text("goal"), minimal_scale=top.text("minimal_scale"),
                platform=platform, inputs=inputs, launch=launch, tracker=tracker,
                expected=expected, baseline=baseline, seed=seed,
                consistency=_consistency(top.section("consistency", optional=True)), source=path,
                replicates=top.integer("replicates", minimum=1, default=1,
                                       fix="write how many seeds to run and average, a whole number >= 1"),
                repo_root=project.root if project is not None else REPO_ROOT,
                framework_checkout=project.framework if project is not None else None,
                detect=_detect(top))
    if len(set(seed.calibration)) > 1 and not case.takes_seed:
        top.fail("seed.calibration", f"{len(seed.calibration)} seeds but the launch takes no seed",
                 "use {seed} in launch.command or set seed.env")
    problem = replicates_problem(case.replicates, gpus=platform.gpus, takes_seed=case.takes_seed, in_case=True)
    if problem:
        top.fail("replicates", *problem)
    return case


def _detect(top: Section) -> dict[str, float]:
    """``detect: {metric: effect}``: what the case's gates must be able to catch (a positive number each)."""
    section = top.section("detect", optional=True)
    if section is None:
        return {}
    return {str(metric): section.number(str(metric), positive=True,
                                        fix="write the smallest change to catch, in the metric's units (> 0)")
            for metric in section.data}


def _markers(top: Section) -> tuple[str, ...]:
    markers = top.str_list("markers")
    for i, marker in enumerate(markers):
        if marker not in MARKERS:
            top.fail(f"markers[{i}]", f"{marker!r} is not a known marker",
                     f"use one of {', '.join(MARKERS)}")
    if len(set(markers)) != len(markers):
        top.fail("markers", "a marker is listed twice", "list each once")
    return markers


def _platform(sec: Section) -> Platform:
    sec.check_keys(required=("gpus",), optional=("framework", "python_packages", "requires"))
    gpus = sec.integer("gpus", minimum=0, fix="write the GPU count (0 = CPU is enough)")
    framework = None
    fw = sec.section("framework", optional=True)
    if fw is not None:
        fw.check_keys(required=("name", "env"), optional=("repo", "ref"))
        for key in ("repo", "ref"):  # `ref:` with no value must not quietly mean HEAD
            if key in fw.data and fw.data[key] is None:
                fw.fail(key, "is empty", f"write the {key} to test, or remove the key")
        env = fw.text("env")
        if not NAME.fullmatch(env):
            fw.fail("env", f"{env!r} is not an environment variable name", "e.g. XTUNER_ROOT")
        framework = Framework(name=fw.text("name"), env=env, repo=fw.text("repo", default=None),
                              ref=fw.text("ref", default=None))
    requires = sec.str_map("requires", default={})
    for dist, spec in requires.items():
        if not valid_specifier(spec):
            sec.fail(f"requires.{dist}", f"{spec!r} is not a version specifier", 'write e.g. ">=0.9,<0.11"')
    return Platform(gpus=gpus, framework=framework,
                    python_packages=sec.str_list("python_packages", default=()), requires=requires)


def valid_specifier(spec: str) -> bool:
    """Whether ``spec`` is a PEP 440 version specifier (``>=0.9``, ``>=0.9,<0.11``)."""
    try:
        SpecifierSet(spec)
    except InvalidSpecifier:
        return False
    return bool(spec.strip())


def _inputs(top: Section) -> dict[str, str]:
    inputs = top.str_map("inputs", default={})
    for key, value in inputs.items():
        check_template(top, f"inputs.{key}", value, _INPUT_PLACEHOLDERS, shell=False)
    return inputs


def _launch(sec: Section) -> Launch:
    sec.check_keys(required=("command", "timeout_s"),
                   optional=("cwd", "env", "term_grace_s", "uses_ray", "fault_args", "python"))
    raw = sec.get("command")
    command: tuple[str, ...] | str
    if isinstance(raw, str) and raw.strip():
        command = raw
        check_template(sec, "command", raw, PLACEHOLDERS, shell=True)
    elif isinstance(raw, list) and raw:
        command = sec.str_list("command")
        for i, arg in enumerate(command):
            check_template(sec, f"command[{i}]", arg, PLACEHOLDERS, shell=False)
    else:
        sec.fail("command", f"{raw!r} is not a command",
                 "give a list of arguments or a non-empty string run by bash")
    cwd = sec.text("cwd", default="{repo}")
    check_template(sec, "cwd", cwd, _PATH_PLACEHOLDERS, shell=False)
    env = sec.str_map("env", default={}, env_values=True)
    for key, value in env.items():
        if not NAME.fullmatch(key):
            sec.fail(f"env.{key}", "not an environment variable name", "use letters, digits and _")
        check_template(sec, f"env.{key}", value, PLACEHOLDERS, shell=False)
    fault_args = sec.str_list("fault_args", default=())
    for i, arg in enumerate(fault_args):
        check_template(sec, f"fault_args[{i}]", arg, PLACEHOLDERS, shell=False)
    if fault_args and not any("{fault}" in a for a in fault_args):
        sec.fail("fault_args", "does not use {fault}", "write e.g. ['--fault', '{fault}']")
    python = sec.text("python", default=None)
    if python is not None:
        check_template(sec, "python", python, _INPUT_PLACEHOLDERS, shell=False)
    return Launch(command=command, cwd=cwd, env=env,
                  timeout_s=sec.number("timeout_s", positive=True, fix=_SECONDS),
                  term_grace_s=sec.number("term_grace_s", positive=True, fix=_SECONDS, default=10.0),
                  uses_ray=sec.boolean("uses_ray", default=False), fault_args=fault_args, python=python)


def _tracker(sec: Section) -> Tracker:
    sec.check_keys(required=("format",), optional=("work_dir_env", "work_dir", "path", "config"))
    fmt = sec.choice("format", TRACKER_FORMATS)
    work_dir_env = sec.text("work_dir_env", default="WORK_DIR", nullable=True)
    if work_dir_env is not None and not NAME.fullmatch(work_dir_env):
        sec.fail("work_dir_env", f"{work_dir_env!r} is not an environment variable name",
                 "e.g. WORK_DIR, or null")
    work_dir = sec.text("work_dir", default=None)
    path = sec.text("path", default=None)
    if work_dir is not None and path is not None:
        sec.fail("path", "both path and work_dir are set", "keep one")
    for key, value in (("work_dir", work_dir), ("path", path)):
        if value is not None:
            check_template(sec, key, value, _PATH_PLACEHOLDERS, shell=False)
    config = sec.text("config", default=None)
    if config is not None:
        if fmt not in CONFIG_CHECKED_FORMATS:
            sec.fail("config", f"only xtuner configs are checked, and format is {fmt!r}",
                     f"remove config or use format {' or '.join(CONFIG_CHECKED_FORMATS)}")
        check_template(sec, "config", config, _INPUT_PLACEHOLDERS, shell=False)
    return Tracker(format=fmt, work_dir_env=work_dir_env, work_dir=work_dir, path=path, config=config)


def _expected(sec: Section, launch: Launch) -> Expected:
    sec.check_keys(required=("steps",), optional=("exact_steps", "wall_time_s"))
    wall = sec.number("wall_time_s", positive=True, fix=_SECONDS, default=None)
    if wall is not None and wall >= launch.timeout_s:
        sec.fail("wall_time_s", f"{wall:g} s is not below launch.timeout_s {launch.timeout_s:g} s",
                 "give the run headroom: raise launch.timeout_s")
    return Expected(steps=sec.integer("steps", minimum=1, fix="write the number of steps"),
                    exact_steps=sec.boolean("exact_steps", default=True), wall_time_s=wall)


def _seed(sec: Section | None) -> Seed:
    if sec is None:
        return Seed(default=0, calibration=(), env=None)
    sec.check_keys(required=(), optional=("default", "calibration", "env"))
    env = sec.text("env", default=None)
    if env is not None and not NAME.fullmatch(env):
        sec.fail("env", f"{env!r} is not an environment variable name", "e.g. SEED")
    return Seed(default=sec.integer("default", minimum=0, default=0, fix="write a seed >= 0"),
                calibration=sec.int_list("calibration", default=()), env=env)


def _consistency(sec: Section | None) -> Consistency:
    if sec is None:
        return Consistency(policy="off")
    sec.check_keys(required=("policy",), optional=("diagnostic_args",))
    args = sec.str_list("diagnostic_args", ())
    for i, arg in enumerate(args):
        check_template(sec, f"diagnostic_args[{i}]", arg, (*PLACEHOLDERS, "diagnostic_config"), shell=False)
    if args and not any("{diagnostic_config}" in a for a in args):
        sec.fail("diagnostic_args", "does not pass {diagnostic_config}",
                 "add e.g. [--diagnostic-config, '{diagnostic_config}']")
    if sec.get("policy") is False:  # YAML 1.1 reads a bare `off` as false
        return Consistency(policy="off", diagnostic_args=args)
    if sec.get("policy") is True:
        sec.fail("policy", "true is not a policy (YAML reads a bare on/yes as true)",
                 "write on-breach or always")
    return Consistency(policy=sec.choice("policy", POLICIES), diagnostic_args=args)
