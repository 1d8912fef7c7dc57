"""What one run of a case is asked: three groups, by the part of the pipeline that reads them.

- :class:`LaunchOptions`: where and how the run is launched (the single run, :mod:`autotest.pipeline.single`, and
  the launchers of :mod:`autotest.run`): its results folder, seed, fault, environment, framework checkout, Ray
  cluster, GPU wait, relaunches, and whether it is only shown (dry run, confirmation);
- :class:`JudgeOptions`: what its verdict judges and how: the baseline, how many seeds are judged on their mean
  (replicates, adaptively), fail-fast, strict power, and why the run is made (its kind in the history);
- :class:`PublishOptions`: where the verdict goes besides its results folder: plots, the history hook, the step
  summary, progress lines.

:class:`RunOptions` composes the three (each defaults to its own defaults), so a call site names only what it
changes: ``RunOptions(LaunchOptions(seed=3), publish=PublishOptions(with_plots=False))``;
``options.changed(launch={"seed": 4})`` is a copy with fields of one or more groups changed. The command line and
the pytest options build one base request from the declared flags (:mod:`autotest.inputs.run_flags`); a command
that makes many runs (A/B, calibration, bisect, the nightly) derives each from it with ``changed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from autotest.report.publish import AfterResults
from autotest.run.infra import DEFAULT_POLICY, RetryPolicy

if TYPE_CHECKING:
    from autotest.judge.live import ReplicateGroup

#: how long a GPU case waits for a free slice of this node (the plugin's --gpu-wait-s help says 6 h)
GPU_WAIT_S = 6 * 3600.0


@dataclass(frozen=True)
class LaunchOptions:
    """Where and how the run is launched."""

    #: root of the per-case results folders; None: the one default (see autotest.run.results_dir)
    results_root: Path | None = None
    #: write into exactly this folder instead of a fresh one under the root (calibration's run<i>-seed<s>)
    results_dir: Path | None = None
    #: the seed of a case that takes one (None: the case's default)
    seed: int | None = None
    #: a fault NAME[:ARG] to inject (embedded workloads); its run's kind is "fault"
    fault: str | None = None
    #: extra environment for the launched command
    env: dict[str, str] = field(default_factory=dict)
    #: the framework repository and ref to test (override the case file and RL_AUTOTEST_FRAMEWORK_*)
    framework_repo: str | None = None
    framework_ref: str | None = None
    #: submit the launch as a Ray job to this cluster instead of a local process group
    ray_address: str | None = None
    #: custom resources the Ray job asks for (``{"probe": 1}``): each run, each replicate, lands on a node offering them
    ray_resources: dict[str, float] = field(default_factory=dict)
    #: how long a GPU case waits for a free slice of this node
    gpu_wait_s: float = GPU_WAIT_S
    #: how often the launcher asks the follower; a poll costs one stat unless the tracker grew
    poll_interval_s: float = 0.1
    #: relaunch limits per infrastructure failure kind (an accuracy FAIL is never relaunched)
    retry_policy: RetryPolicy = DEFAULT_POLICY
    #: run the case's shorter tier of this name (``tiers:``; autotest.judge.tier); None: the full run
    tier: str | None = None
    #: make the folder, preflight and card, and launch nothing
    dry_run: bool = False
    #: shown the experiment card before launching; returning False launches nothing
    confirm: Callable[[str], bool] | None = None


@dataclass(frozen=True)
class JudgeOptions:
    """What the verdict judges and how."""

    #: judge against this baseline file instead of the case's (calibration's baselines dir)
    baseline_path: Path | None = None
    #: seeds to run side by side and judge on their mean; None: the case's ``replicates``
    replicates: int | None = None
    #: allow more replicates than the platform's cap (autotest.inputs.replicate_limits); ``--force``
    force_replicates: bool = False
    #: adaptive replicates: one seed, then up to this many when it lands near a threshold (None: off)
    adaptive_max: int | None = None
    #: stop the run once a gate is decided failed (the live follower, autotest.judge.live)
    fail_fast: bool = False
    #: a PASS whose gates cannot catch the case's declared ``detect`` targets is an ERROR, not a warning
    strict_power: bool = False
    #: why the run is made ("gate", "calibration", "bisect", "ab"), recorded as results.json's context.kind; a run
    #: with a fault is "fault" whatever this says. Only gate and calibration runs feed the history's
    #: calibration, drift and bands
    purpose: str = "gate"
    #: set by the replicates runner under fail-fast: this run's replicates and its label among them (fail-fast
    #: decides on their mean, :class:`autotest.judge.live.ReplicateGroup`)
    replicate_group: ReplicateGroup | None = None
    replicate_label: str = ""


@dataclass(frozen=True)
class PublishOptions:
    """Where the verdict goes besides its results folder."""

    #: draw plots/*.png beside report.md
    with_plots: bool = True
    #: called with the results folder once results.json is written (the shells record the run in
    #: the history this way); the lines it returns go into report.md and the step summary
    after_results: AfterResults | None = None
    #: append the verdict to $GITHUB_STEP_SUMMARY (a replicate's own verdict does not: the mean's does)
    step_summary: bool = True
    #: called with one progress line while the run goes (terminal or CI log)
    progress: Callable[[str], None] | None = None


@dataclass(frozen=True)
class RunOptions:
    """Everything one run of a case is asked, by group."""

    launch: LaunchOptions = field(default_factory=LaunchOptions)
    judge: JudgeOptions = field(default_factory=JudgeOptions)
    publish: PublishOptions = field(default_factory=PublishOptions)

    @property
    def kind(self) -> str:
        """The run's kind in its results and the history: "fault" for an injected fault, "tier" for a gate run of a
        shorter tier (its prefix must not feed calibration, drift or bands as a full run), else its purpose."""
        if self.launch.fault:
            return "fault"
        return "tier" if self.launch.tier and self.judge.purpose == "gate" else self.judge.purpose

    def changed(self, *, launch: Mapping[str, Any] | None = None, judge: Mapping[str, Any] | None = None,
                publish: Mapping[str, Any] | None = None) -> RunOptions:
        """A copy with the named fields of each group changed (``dataclasses.replace`` one level down)."""
        return RunOptions(replace(self.launch, **(launch or {})), replace(self.judge, **(judge or {})),
                          replace(self.publish, **(publish or {})))

    def with_fields(self, values: Mapping[str, Any]) -> RunOptions:
        """A copy with fields named ``group.name`` changed (``{"launch.seed": 3}``): how a declared flag
        (:mod:`autotest.inputs.run_flags`) sets the request it names."""
        groups: dict[str, dict[str, Any]] = {"launch": {}, "judge": {}, "publish": {}}
        for name, value in values.items():
            group, _, key = name.partition(".")
            groups[group][key] = value
        return self.changed(**groups)
