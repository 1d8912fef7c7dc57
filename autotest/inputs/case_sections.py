"""Validating a case file: its top level and each section, into the frozen case (:mod:`autotest.inputs.case_model`).

Every mistake is one ``UsageError("<file>: <dotted.key>: <problem>; <what to do>")`` raised through
:class:`autotest.inputs.schema.Section`; the schema itself is the docstring of :mod:`autotest.inputs.case`.
"""

from __future__ import annotations

from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from autotest.consistency.layout import parse_layout
from autotest.errors import UsageError
from autotest.inputs.case_model import (
    MARKERS,
    PLACEHOLDERS,
    POLICIES,
    Case,
    Consistency,
    Expected,
    Framework,
    Launch,
    Platform,
    Seed,
    Tracker,
)
from autotest.inputs.placeholders import REPO_ROOT, check_template
from autotest.inputs.performance_policy import parse_performance
from autotest.inputs.project import Project
from autotest.inputs.run_limits import SEED_HELP, SEED_LIMIT
from autotest.readers import registry
from autotest.inputs.replicate_limits import replicates_problem
from autotest.inputs.case_recipe import parse_recipe
from autotest.inputs.case_framework_spec import parse_framework_spec
from autotest.inputs.case_node import parse_node
from autotest.inputs.case_tiers import parse_tiers
from autotest.inputs.case_replay import parse_replay
from autotest.inputs.case_variants import parse_variants
from autotest.inputs.resume_phase import parse_resume
from autotest.inputs.schema import NAME, Section, load_section, show

_INPUT_PLACEHOLDERS = ("repo",)
_PATH_PLACEHOLDERS = ("repo", "work_dir")
_SECONDS = "write a positive number of seconds"


def parse_case(path: Path, project: Project | None) -> Case:
    """Read and validate one case file and build the Case; ``project`` is the project it belongs to (None: a
    packaged case, or a file outside any project)."""
    # a project case may leave its baseline to the project's baselines folder
    needed = ("name", "description", "markers", "goal", "minimal_scale", "platform", "launch", "tracker",
              "expected")
    optional = ("inputs", "seed", "consistency", "replicates", "detect", "performance", "resume", "equivalence",
                "replay", "shadow", "recipe", "framework_spec", "node", "tiers")
    top = load_section(path, what="a case", doc="docs/cases.md", required=needed if project else (*needed, "baseline"),
                       optional=(*optional, "baseline") if project else optional)
    name = top.text("name")
    if name != path.stem:
        top.fail("name", f"{name!r} does not match the file name {path.name!r}",
                 "make them equal")
    markers = parse_markers(top)
    platform = parse_platform(top.section("platform"))
    if (platform.gpus > 0) != ("gpu" in markers):
        need = "add 'gpu' to markers" if platform.gpus > 0 else "remove 'gpu' or set platform.gpus"
        top.fail("markers", f"platform.gpus is {platform.gpus} but 'gpu' is "
                 f"{'absent' if platform.gpus > 0 else 'present'}", need)
    inputs = parse_inputs(top)
    launch = parse_launch(top.section("launch"))
    tracker = parse_tracker(top.section("tracker"))
    expected = parse_expected(top.section("expected"), launch)
    if project is not None and "baseline" not in top.data:
        baseline = str(project.baselines / f"{name}.yaml")
    else:
        baseline = top.text("baseline")
    seed = parse_seed(top.section("seed", optional=True))
    case = Case(name=name, description=top.text("description"), markers=markers,
                goal=top.text("goal"), minimal_scale=top.text("minimal_scale"),
                platform=platform, inputs=inputs, launch=launch, tracker=tracker,
                expected=expected, baseline=baseline, seed=seed,
                consistency=parse_consistency(top.section("consistency", optional=True)), source=path,
                replicates=top.integer("replicates", minimum=1, default=1,
                                       fix="write how many seeds to run and average, a whole number >= 1"),
                repo_root=project.root if project is not None else REPO_ROOT,
                framework_checkout=project.framework if project is not None else None,
                detect=parse_detect(top),
                performance=parse_performance(top.section("performance", optional=True)),
                resume=parse_resume(top.section("resume", optional=True), PLACEHOLDERS, expected.steps, tracker.path),
                variants=parse_variants(top), replay=parse_replay(top.section("replay", optional=True)),
                shadow=top.boolean("shadow", default=False), recipe=parse_recipe(top.section("recipe", optional=True)),
                framework_spec=parse_framework_spec(top, platform.framework is not None or (
                    project is not None and project.framework is not None)),
                node=parse_node(top.section("node", optional=True), platform.gpus),
                tiers=parse_tiers(top.section("tiers", optional=True), expected.steps, PLACEHOLDERS))
    if case.recipe is not None and platform.framework is None:
        top.fail("recipe", "holds a framework config, but the case runs no framework",
                 "set platform.framework or remove recipe")
    if len(set(seed.calibration)) > 1 and not case.takes_seed:
        top.fail("seed.calibration", f"{len(seed.calibration)} seeds but the launch takes no seed",
                 "use {seed} in launch.command or set seed.env")
    if seed.default in seed.calibration:
        # a deterministic trainer replays that calibration run exactly, so the gate it is judged by was fitted to it
        top.section("seed").fail_at_line(
            "default", f"{seed.default} is also a calibration seed (seed.calibration), so a gating run repeats a run "
            "its thresholds were fitted to and cannot show a false alarm",
            f"pick a default seed outside seed.calibration, e.g. {max(seed.calibration) + 1}")
    problem = replicates_problem(case.replicates, gpus=platform.gpus, takes_seed=case.takes_seed, in_case=True)
    if problem:
        top.fail("replicates", *problem)
    return case


def parse_detect(top: Section) -> dict[str, float]:
    """``detect: {metric: effect}``: what the case's gates must be able to catch (a positive number each)."""
    section = top.section("detect", optional=True)
    if section is None:
        return {}
    return {str(metric): section.number(str(metric), positive=True,
                                        fix="write the smallest change to catch, in the metric's units (> 0)")
            for metric in section.data}


def parse_markers(top: Section) -> tuple[str, ...]:
    markers = top.str_list("markers")
    for i, marker in enumerate(markers):
        if marker not in MARKERS:
            top.fail(f"markers[{i}]", f"{marker!r} is not a known marker",
                     f"use one of {', '.join(MARKERS)}")
    if len(set(markers)) != len(markers):
        top.fail("markers", "a marker is listed twice", "list each once")
    return markers


def parse_platform(sec: Section) -> Platform:
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


def parse_inputs(top: Section) -> dict[str, str]:
    inputs = top.str_map("inputs", default={})
    for key, value in inputs.items():
        check_template(top, f"inputs.{key}", value, _INPUT_PLACEHOLDERS, shell=False)
    return inputs


def parse_launch(sec: Section) -> Launch:
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


def parse_tracker(sec: Section) -> Tracker:
    sec.check_keys(required=("format",), optional=("work_dir_env", "work_dir", "path", "config", "pattern"))
    fmt = _tracker_format(sec)
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
    if "config" in sec.data:
        sec.fail("config", "moved to recipe.config", "write it as recipe: {config: ...} (docs/cases.md)")
    return Tracker(format=fmt, work_dir_env=work_dir_env, work_dir=work_dir, path=path)


def _tracker_format(sec: Section) -> str:
    """``format`` as the readers take it: ``name``, or ``name:option`` with ``pattern`` joined on (``console:verl``)."""
    value = sec.get("format")
    names = registry.format_names()
    name, option = registry.split_option(value) if isinstance(value, str) else (value, None)
    record = registry.find(name) if isinstance(name, str) else None
    if record is None:
        sec.fail("format", f"{show(value)} is not one of {', '.join(names)}", f"write one of {', '.join(names)} "
                 "(quote it)")
    if option is not None and "pattern" in sec.data:
        sec.fail("pattern", "format and pattern both give a pattern", f"write format: {name} and keep pattern")
    option = sec.text("pattern", default=option)
    if record.option is None:
        if option is not None:
            sec.fail("pattern" if "pattern" in sec.data else "format", f"format {name!r} takes no pattern",
                     "remove it (console logs take one)")
        return name
    if option is None:
        sec.fail("pattern", f"format {name!r} needs one: {record.option}", "add tracker.pattern")
    problem = record.option_error(option)
    if problem is not None:
        sec.fail("pattern", problem, record.option_fix)
    return f"{name}{registry.OPTION_SEPARATOR}{option}"


def parse_expected(sec: Section, launch: Launch) -> Expected:
    sec.check_keys(required=("steps",), optional=("exact_steps", "wall_time_s"))
    wall = sec.number("wall_time_s", positive=True, fix=_SECONDS, default=None)
    if wall is not None and wall >= launch.timeout_s:
        sec.fail("wall_time_s", f"{wall:g} s is not below launch.timeout_s {launch.timeout_s:g} s",
                 "give the run headroom: raise launch.timeout_s")
    return Expected(steps=sec.integer("steps", minimum=1, fix="write the number of steps"),
                    exact_steps=sec.boolean("exact_steps", default=True), wall_time_s=wall)


def parse_seed(sec: Section | None) -> Seed:
    if sec is None:
        return Seed(default=0, calibration=(), env=None)
    sec.check_keys(required=(), optional=("default", "calibration", "env"))
    env = sec.text("env", default=None)
    if env is not None and not NAME.fullmatch(env):
        sec.fail("env", f"{env!r} is not an environment variable name", "e.g. SEED")
    seed = Seed(default=sec.integer("default", minimum=0, default=0, fix="write a seed >= 0"),
                calibration=sec.int_list("calibration", default=()), env=env)
    seeds = (("default", seed.default), *((f"calibration[{i}]", v) for i, v in enumerate(seed.calibration)))
    for where, value in seeds:
        if value >= SEED_LIMIT:  # the seeds every generator takes (autotest.inputs.run_limits)
            sec.fail(where, f"{value} is not below 2**32", f"write {SEED_HELP}")
    return seed


def parse_consistency(sec: Section | None) -> Consistency:
    if sec is None:
        return Consistency(policy="off")
    sec.check_keys(required=("policy",), optional=("diagnostic_args", "layout"))
    args = sec.str_list("diagnostic_args", ())
    layout = _consistency_layout(sec.section("layout", optional=True))
    for i, arg in enumerate(args):
        check_template(sec, f"diagnostic_args[{i}]", arg, (*PLACEHOLDERS, "diagnostic_config"), shell=False)
    if args and not any("{diagnostic_config}" in a for a in args):
        sec.fail("diagnostic_args", "does not pass {diagnostic_config}",
                 "add e.g. [--diagnostic-config, '{diagnostic_config}']")
    if sec.get("policy") is False:  # YAML 1.1 reads a bare `off` as false
        return Consistency(policy="off", diagnostic_args=args, layout=layout)
    if sec.get("policy") is True:
        sec.fail("policy", "true is not a policy (YAML reads a bare on/yes as true)",
                 "write on-breach or always")
    return Consistency(policy=sec.choice("policy", POLICIES), diagnostic_args=args, layout=layout)


def _consistency_layout(sec: Section | None) -> tuple[tuple[str, str], ...]:
    """``layout: {rollout: "tp=4", train: "pp=2"}``: each side's text checked as ``consistency analyze`` reads it."""
    if sec is None:
        return ()
    sec.check_keys(required=(), optional=("rollout", "train"))
    found = []
    for side in ("rollout", "train"):
        text = sec.text(side, default=None)
        if text is None:
            continue
        try:
            parse_layout(str(text), side)
        except UsageError as exc:
            sec.fail(side, str(exc).removeprefix(f"{side}: "), "e.g. tp=4,pp=2 (keys tp, pp, heads, kv_heads, partial)")
        found.append((side, str(text)))
    return tuple(found)
