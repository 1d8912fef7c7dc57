"""The frozen, typed case: what :func:`autotest.inputs.case.load_case` builds from a case file.

The schema (every key, its default and what it means) is the docstring of :mod:`autotest.inputs.case`;
validating the sections is :mod:`autotest.inputs.case_sections`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from autotest.inputs.case_node import NodeRequirements
from autotest.inputs.performance_policy import PerformancePolicy
from autotest.inputs.placeholders import REPO_ROOT
from autotest.inputs.case_recipe import Recipe
from autotest.inputs.case_tiers import Tier
from autotest.inputs.case_framework_spec import FrameworkSpecRef
from autotest.inputs.case_replay import Replay
from autotest.inputs.case_variants import Variant
from autotest.inputs.resume_phase import Resume
from autotest.readers.registry import BUILTIN

CASES_DIR = REPO_ROOT / "autotest" / "cases"
MARKERS = ("grpo", "mopd", "gpu", "calibration")
#: the built-in formats (autotest.readers.registry; a case may also name a plugin's, registry.format_names())
TRACKER_FORMATS = tuple(f.name for f in BUILTIN)
POLICIES = ("off", "on-breach", "always")
PLACEHOLDERS = ("python", "repo", "work_dir", "seed", "fault")


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
    #: the format the log is read as, ``name`` or ``name:option`` (``console:verl``: tracker.pattern joined on)
    format: str
    work_dir_env: str | None
    work_dir: str | None
    path: str | None


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
    #: each side's parallel layout (``rollout`` / ``train`` -> ``tp=4,pp=2``), for reassembling per-rank dumps
    layout: tuple[tuple[str, str], ...] = ()


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
    #: how its timing gates are judged against the machine (autotest.inputs.performance_policy)
    performance: PerformancePolicy = field(default_factory=PerformancePolicy)
    #: the resume phase: checkpoint, resume, compare (autotest.inputs.resume_phase); None: the case has none
    resume: Resume | None = None
    #: launch variants that must train the same as the case (``equivalence:``; autotest.inputs.case_variants)
    variants: tuple[Variant, ...] = ()
    #: how the launch keeps its rollouts and trains on kept ones (``replay:``; autotest.inputs.case_replay)
    replay: Replay | None = None
    #: every gate of its baseline judged as a shadow gate: recorded, never failing the run (``shadow: true``)
    shadow: bool = False
    #: the framework config the run resolves and what it must resolve to (``recipe:``; autotest.inputs.case_recipe)
    recipe: Recipe | None = None
    #: the framework's own spec for this case and whether the case follows it (``framework_spec:``)
    framework_spec: FrameworkSpecRef | None = None
    #: what its launch script assumes of the node (``node:``; autotest.inputs.case_node); None: nothing
    node: NodeRequirements | None = None
    #: shorter runs of it, by name (``tiers:``; autotest.inputs.case_tiers)
    tiers: dict[str, Tier] = field(default_factory=dict)

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
        return self.seed.env is not None or any("{seed}" in t for t in launch_texts(self.launch))

    @property
    def takes_fault(self) -> bool:
        return any("{fault}" in t for t in launch_texts(self.launch))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["source"] = str(self.source)
        return data


def launch_texts(launch: Launch) -> list[str]:
    """Every launch text a placeholder may stand in: the command, the env values, the fault arguments."""
    command = [launch.command] if isinstance(launch.command, str) else list(launch.command)
    return command + list(launch.env.values()) + list(launch.fault_args)
