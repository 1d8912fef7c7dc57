"""The frozen, typed baseline: what :func:`autotest.inputs.baseline.load_baseline` builds from a baseline file.

The keys are declared in :mod:`autotest.inputs.baseline_schema`; writing a baseline back is
:mod:`autotest.inputs.baseline_writer`. :func:`for_hardware` picks the per-hardware thresholds for this node.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from autotest.inputs.hardware_overrides import HardwareOverride, pick
from autotest.inputs.roles import RoleMap, resolve_roles
from autotest.scopes import scope_kind

SCHEMA_VERSION = 1
METHODS = ("absolute", "relative", "slowdown", "value")
OPERATORS = ("<", "<=", ">", ">=")
SEVERITIES = ("gate", "reference", "shadow")
#: a gate-in-waiting: judged exactly like a gate and recorded, its FAIL never deciding the run (docs/baselines.md)
SHADOW = "shadow"
#: the severities judged as gates (calibration and power measure both alike)
GATING = ("gate", SHADOW)
#: the threshold ``rl-autotest init`` writes: never a number, so a spec cannot pass before it is calibrated
PLACEHOLDER = "placeholder"
#: |base| below this is treated as this value in the relative error (explicit, reported)
DEFAULT_RELATIVE_FLOOR = 1e-12


@dataclass(frozen=True)
class CheckSpec:
    """One declared check: ``error(method) OPERATOR threshold`` over a scope of steps.

    What the scope reads (``percentile``, ``points``, ``window``, ``statistic``, ``split_at``) and means is its
    check kind's (:mod:`autotest.scopes`)."""

    metric: str
    method: str
    operator: str
    threshold: float
    scope: str = "stepwise"
    severity: str = "gate"
    percentile: float | None = None
    points: tuple[int, ...] = ()
    window: tuple[int, int] | None = None
    relative_floor: float = DEFAULT_RELATIVE_FLOOR
    #: how the threshold was derived (seed table, calibration with measured max deviation, ...)
    derivation: str = ""
    measured_max_deviation: float | None = None
    #: scope pooled: gate the mean of the standardised deviations, or their fitted trend
    statistic: str = "mean"
    #: per-hardware thresholds (the seed's ``threshold`` is the default)
    overrides: tuple[HardwareOverride, ...] = ()
    #: the hardware whose override set ``threshold`` on this node (None: the default applies)
    hardware: str | None = None
    #: ``threshold: placeholder`` (``rl-autotest init``): no number yet; the check is an ERROR until calibrated
    placeholder: bool = False
    #: scope slope: steps where a new segment starts (resume points); the fit has one intercept per segment
    split_at: tuple[int, ...] = ()
    #: a third-party check kind's own keys and values, in the order written (autotest.scopes.kind.Scope.parse)
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def shown_threshold(self) -> str:
        """The threshold as written: a number, or ``placeholder``."""
        return PLACEHOLDER if self.placeholder else f"{self.threshold:g}"

    @property
    def check_id(self) -> str:
        return scope_kind(self.scope).check_id(self)

    @property
    def gating(self) -> bool:
        """Judged as a gate: a gate, or a shadow gate (whose FAIL is recorded but never fails the run)."""
        return self.severity in GATING

    def describe(self) -> str:
        scope = scope_kind(self.scope).describe(self)
        severity = {"gate": "", SHADOW: " (shadow: judged and recorded, never fails)"}.get(
            self.severity, " (reference only, never fails)")
        hardware = f" (threshold for {self.hardware})" if self.hardware else ""
        return f"{self.metric}: {self.method} {self.operator} {self.shown_threshold}{hardware}, {scope}{severity}"


@dataclass(frozen=True)
class StepPolicy:
    """How many training steps a run must have."""

    expected: int | None = None
    exact: bool = False


@dataclass(frozen=True)
class CalibrationSpec:
    """The optional ``calibration:`` section: how ``rl-autotest calibrate`` turns N runs into thresholds.

    threshold = max(measured max run-to-run deviation x ``margin``, floors), rounded up to two
    significant digits. Floors keep a threshold from collapsing to zero when the runs agree.
    """

    #: default number of runs (``--runs`` overrides it)
    runs: int = 3
    #: multiplier on the measured max run-to-run deviation (1.5 as seed 003 did with N=3)
    margin: float = 1.5
    #: a relative check's threshold is never below this; an absolute one never below it x max |golden|
    relative_floor: float = 0.01
    #: z of the binomial floor z * sqrt(p(1-p)/n) for eval metrics with a known eval-set size
    binomial_z: float = 2.0
    #: per-metric absolute floors, in the units of the metric's checks (e.g. the seed's k3 1e-4)
    floors: Mapping[str, float] = field(default_factory=dict)
    #: eval metric -> number of eval items behind it (for the binomial floor)
    eval_set_size: Mapping[str, int] = field(default_factory=dict)
    #: chance, per clean run, that any pooled gate check of the case false-alarms; split evenly over them
    false_alarm_budget: float = 0.05
    #: a declared floor never exceeds this many times the case's own level (max |golden|, or the measured
    #: deviation): an fp32 rollout's healthy k3 of 1e-14 is not gated at a bf16-sized 1e-4
    floor_headroom: float = 1000.0


@dataclass(frozen=True)
class PairedWindow:
    """One paired gate: a metric's mean over steps ``start..end``, head minus base on the same seed."""

    metric: str
    start: int
    end: int
    #: root mean square of the A/A pairs' differences of the window mean (the paired noise of one seed)
    noise: float
    #: the window's mean level in the A/A runs (the floor of a threshold is a share of it)
    level: float
    #: the metric's declared floor (``calibration.floors``): a change below it never matters, paired or not
    floor: float = 0.0

    @property
    def gate_id(self) -> str:
        return f"{self.metric}[paired {self.start}-{self.end}]"


@dataclass(frozen=True)
class PairedSpec:
    """The ``paired:`` section: the noise of head-minus-base differences, measured on A/A pairs
    (``rl-autotest calibrate --paired``; judged by :mod:`autotest.judge.paired`)."""

    #: A/A pairs measured (the t quantile's degrees of freedom)
    pairs: int
    #: how the second run of each pair was made to differ (an environment line, or "natural")
    perturbation: str
    windows: tuple[PairedWindow, ...]
    #: chance, per clean A/B, that any paired gate false-alarms; split evenly over the windows
    false_alarm_budget: float = 0.05
    #: a threshold never falls below this share of the window's level (pairs that agree bitwise)
    relative_floor: float = 0.01
    #: the seeds the pairs ran
    seeds: tuple[int, ...] = ()


@dataclass(frozen=True)
class Baseline:
    name: str
    path: Path
    checks: tuple[CheckSpec, ...]
    golden_table: Mapping[str, Mapping[int, float]] | None = None
    golden_tracker: Path | None = None
    golden_format: str = "auto"
    #: pin of the reference tracker: a share path is mutable, the review was of these bytes
    golden_tracker_sha256: str | None = None
    golden_tracker_steps: int | None = None
    metric_aliases: Mapping[str, str] = field(default_factory=dict)
    short_names: Mapping[str, str] = field(default_factory=dict)
    steps: StepPolicy = StepPolicy()
    calibrated_range: tuple[int, int] | None = None
    wall_time_max_s: float | None = None
    wall_time_overrides: tuple[HardwareOverride, ...] = ()
    #: the hardware whose override set ``wall_time_max_s`` on this node (None: the default applies)
    wall_time_hardware: str | None = None
    provenance: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    calibration: CalibrationSpec | None = None
    #: metric -> step -> calibrated seed-to-seed standard deviation (what scope pooled divides by)
    noise_table: Mapping[str, Mapping[int, float]] | None = None
    #: metric -> the least step-to-step roughness of a calibration run (autotest.judge.per_step_noise.roughness)
    roughness: Mapping[str, float] | None = None
    #: the framework's log vocabulary (``preset:``), None: inferred from the checked metrics' names
    preset: str | None = None
    #: metric -> role declared in the baseline (``roles:``); see autotest.inputs.roles
    roles: Mapping[str, str] = field(default_factory=dict)
    #: A/A-measured noise of paired (head - base) differences, None: not calibrated for A/B
    paired: PairedSpec | None = None
    #: early looks at each pooled mean gate under ``--fail-fast``: (share of the window's steps logged, the share of
    #: the gate's false-alarm budget the look spends) per look; set by :mod:`autotest.judge.step_looks` at run time,
    #: never read from or written to the YAML (empty: the gate is judged once, at its window's end)
    step_looks: tuple[tuple[float, float], ...] = ()

    @property
    def role_map(self) -> RoleMap:
        """Each checked metric's role: declared, else the preset's (named or inferred)."""
        return resolve_roles({c.metric for c in self.checks}, self.roles, self.preset)

    def display(self, metric: str) -> str:
        for short, full in self.short_names.items():
            if full == metric:
                return f"{short} ({metric})"
        return metric


def in_shadow(baseline: Baseline) -> Baseline:
    """``baseline`` with every gate a shadow gate: a case in shadow (``shadow: true``) is judged and recorded, its
    checks never failing the run (reference checks stay reference)."""
    return replace(baseline, checks=tuple(replace(c, severity=SHADOW) if c.severity == "gate" else c
                                          for c in baseline.checks))


def for_hardware(baseline: Baseline, gpu: Mapping[str, Any] | None) -> Baseline:
    """``baseline`` with each per-hardware override that matches ``gpu`` (the preflight's fingerprint) applied."""
    checks = []
    for check in baseline.checks:
        chosen = pick(check.overrides, gpu)
        checks.append(replace(check, threshold=chosen.value, hardware=chosen.describe()) if chosen else check)
    wall = pick(baseline.wall_time_overrides, gpu)
    return replace(baseline, checks=tuple(checks),
                   wall_time_max_s=wall.value if wall else baseline.wall_time_max_s,
                   wall_time_hardware=wall.describe() if wall else None)
