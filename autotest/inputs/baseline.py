"""Golden baselines: golden values, the checks to run against them, and their provenance.

One YAML file per case in ``baselines/<case>.yaml``, validated on load like a case file (see
``autotest.inputs.schema``): every mistake is one line naming the file and the dotted key. Every parameter
a check uses is explicit in the file or shown with its default in the report.

Schema::

    schema_version: 1
    name: str                  default: the file name without .yaml
    description: str
    golden:                    exactly one of table and tracker
      table: {metric: {step: value}}
      tracker: str             a reference tracker.jsonl; ${ENV} expanded, relative to this file
      format: str              its format (default auto)
      tracker_sha256: str      the reviewed tracker's sha256 (64 hex digits); a different file is an ERROR
      tracker_steps: int       the reviewed tracker's number of training steps (checked with the hash)
      noise: {metric: {step: sd}}  calibrated seed-to-seed standard deviation per step (scope pooled)
    checks:                    a non-empty list of
      - metric, method (absolute|relative|slowdown|value), operator (< <= > >=), threshold (a number,
        or ``placeholder``: written by ``rl-autotest init``, ERROR until ``calibrate`` sets it),
        scope (stepwise|percentile|final|points|window|pooled; default stepwise), severity (gate|reference),
        percentile (scope percentile), points: [int] (scope points), window: [first, last] (scope
        window; optional for pooled), statistic (scope pooled: mean|trend; default mean), relative_floor,
        derivation, measured_max_deviation,
        overrides: [{hardware: {gpu: str, count: int}, threshold}]  per-hardware thresholds of a
        machine-dependent check (time/step); the preflight's GPU fingerprint picks one, else threshold
    metric_aliases, short_names: {str: str}
    preset: str                the log vocabulary of the framework: xtuner|verl|slime|trl|nemo-rl (default:
                               inferred from the metric names); see autotest/inputs/roles.py
    roles: {metric: role}      a checked metric's role (reward, eval, mismatch, step_time, ...; see roles.py)
    steps: {expected: int, exact: bool}
    calibrated_range: [first, last]
    wall_time: {max_s: number, overrides: [{hardware: {gpu, count}, max_s}]}
    provenance: {...}          free-form: date, commit, runs, versions, hardware
    calibration: {runs, margin, relative_floor, binomial_z, false_alarm_budget, floors: {metric: number},
                  eval_set_size: {metric: int}}   see CalibrationSpec
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from autotest.inputs.golden_table import check_golden_keys, parse_step_table
from autotest.inputs.hardware_overrides import HardwareOverride, parse_overrides, pick
from autotest.inputs.roles import RoleMap, parse_roles, resolve_roles
from autotest.inputs.schema import Section, expand_env, load_section, show

SCHEMA_VERSION = 1
METHODS = ("absolute", "relative", "slowdown", "value")
OPERATORS = ("<", "<=", ">", ">=")
SCOPES = ("stepwise", "percentile", "final", "points", "window", "pooled")
SEVERITIES = ("gate", "reference")
#: what a pooled check gates: the mean of z over the window, or its fitted change across it
POOLED_STATISTICS = ("mean", "trend")
#: the threshold ``rl-autotest init`` writes: never a number, so a spec cannot pass before it is calibrated
PLACEHOLDER = "placeholder"
#: |base| below this is treated as this value in the relative error (explicit, reported)
DEFAULT_RELATIVE_FLOOR = 1e-12


@dataclass(frozen=True)
class CheckSpec:
    """One declared check: ``error(method) OPERATOR threshold`` over a scope of steps."""

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

    @property
    def shown_threshold(self) -> str:
        """The threshold as written: a number, or ``placeholder``."""
        return PLACEHOLDER if self.placeholder else f"{self.threshold:g}"

    @property
    def check_id(self) -> str:
        if self.scope == "pooled":  # one metric may be pooled over several phases, by mean and trend
            kind = "pooled" if self.statistic == "mean" else f"pooled {self.statistic}"
            if self.window:
                return f"{self.metric}[{kind} {self.window[0]}-{self.window[1]}]"
            return f"{self.metric}[{kind}]"
        return f"{self.metric}[{self.scope}]"

    def describe(self) -> str:
        scope = self.scope
        if self.scope == "percentile":
            scope = f"p{self.percentile:g} of per-step errors"
        elif self.scope == "points":
            scope = "at steps " + "/".join(str(p) for p in self.points)
        elif self.scope == "window" and self.window:
            scope = f"mean over steps {self.window[0]}-{self.window[1]}"
        elif self.scope == "final":
            scope = "final point only"
        elif self.scope == "pooled":
            where = f"steps {self.window[0]}-{self.window[1]}" if self.window else "every calibrated step"
            what = "mean" if self.statistic == "mean" else "fitted first-to-last change"
            scope = f"|{what} of per-step deviations / calibrated noise| over {where}"
        severity = "" if self.severity == "gate" else " (reference only, never fails)"
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
    #: the framework's log vocabulary (``preset:``), None: inferred from the checked metrics' names
    preset: str | None = None
    #: metric -> role declared in the baseline (``roles:``); see autotest.inputs.roles
    roles: Mapping[str, str] = field(default_factory=dict)

    @property
    def role_map(self) -> RoleMap:
        """Each checked metric's role: declared, else the preset's (named or inferred)."""
        return resolve_roles({c.metric for c in self.checks}, self.roles, self.preset)

    @property
    def golden_source(self) -> str:
        return str(self.golden_tracker) if self.golden_tracker else f"{self.path} (golden table)"

    def display(self, metric: str) -> str:
        for short, full in self.short_names.items():
            if full == metric:
                return f"{short} ({metric})"
        return metric


_DOC = "docs/baselines.md"
_CHECK_KEYS = ("scope", "severity", "percentile", "points", "window", "relative_floor", "derivation",
               "measured_max_deviation", "statistic", "overrides")


def _check(sec: Section) -> CheckSpec:
    sec.check_keys(required=("metric", "method", "operator", "threshold"), optional=_CHECK_KEYS)
    scope = sec.choice("scope", SCOPES, default="stepwise")
    percentile = None
    if scope == "percentile":
        percentile = sec.number("percentile", fix="write a percentile within 0..100, e.g. 80")
        if not 0 <= percentile <= 100:
            sec.fail("percentile", f"{percentile:g} is outside 0..100", "write a percentile within 0..100, e.g. 80")
    elif "percentile" in sec.data:
        sec.fail("percentile", f"only applies to scope 'percentile', not {scope!r}",
                 "remove it or set scope: percentile")
    points: tuple[int, ...] = ()
    if scope == "points":
        points = tuple(sorted(set(sec.int_list("points"))))
        if not points:
            sec.fail("points", "the list is empty", "name the steps to check, e.g. [5, 10]")
    if scope == "pooled" and sec.data.get("method") != "absolute":
        sec.fail("method", f"{show(sec.data.get('method'))} cannot be pooled",
                 "write method: absolute (deviations are standardised by the calibrated noise)")
    if "statistic" in sec.data and scope != "pooled":
        sec.fail("statistic", f"only applies to scope 'pooled', not {scope!r}", "remove it or set scope: pooled")
    method = sec.choice("method", METHODS)
    operator = sec.choice("operator", OPERATORS)
    placeholder = sec.get("threshold") == PLACEHOLDER
    if placeholder:
        threshold = math.nan
    else:
        threshold = sec.number("threshold", fix=f"write a number, e.g. 0.05 (unquoted), or {PLACEHOLDER} "
                                                "until rl-autotest calibrate sets it")
        _check_sign(sec, method, operator, threshold)
    overrides = parse_overrides(sec, "threshold", validate=lambda entry, value: _check_sign(entry, method, operator,
                                                                                             value))
    return CheckSpec(
        metric=sec.text("metric"),
        method=method,
        operator=operator,
        threshold=threshold,
        scope=scope,
        severity=sec.choice("severity", SEVERITIES, default="gate"),
        percentile=percentile,
        points=points,
        window=_step_range(sec, "window") if scope == "window" or (scope == "pooled" and "window" in sec.data)
        else None,
        relative_floor=sec.number("relative_floor", positive=True, default=DEFAULT_RELATIVE_FLOOR,
                                  fix="write a small positive number, e.g. 1.0e-12"),
        derivation=sec.text("derivation", ""),
        measured_max_deviation=sec.number("measured_max_deviation", minimum=0, default=None,
                                          fix="write the measured deviation (>= 0) or remove it"),
        statistic=sec.choice("statistic", POOLED_STATISTICS, default="mean"),
        overrides=overrides,
        placeholder=placeholder,
    )


def _check_sign(sec: Section, method: str, operator: str, threshold: float) -> None:
    """A distance (absolute, relative, slowdown) is never negative: some thresholds decide nothing."""
    if method == "value":
        return
    always = (operator in (">", ">=") and threshold < 0) or (operator == ">=" and threshold == 0)
    never = (operator in ("<", "<=") and threshold < 0) or (operator == "<" and threshold == 0)
    if always or never:
        outcome = "always passes" if always else "never passes"
        sec.fail("threshold", f"{method} error {operator} {threshold:g} {outcome} (the error is never negative)",
                 "write a threshold above 0, e.g. 0.05")


def _step_range(sec: Section, name: str) -> tuple[int, int]:
    steps = sec.int_list(name)
    if len(steps) != 2 or steps[0] > steps[1]:
        sec.fail(name, f"{show(list(steps))} is not [first_step, last_step]", "write e.g. [0, 25] (first <= last)")
    return steps[0], steps[1]


def _metric_numbers(sec: Section, name: str, integer: bool, checked: set[str]) -> dict[str, float]:
    mapping = sec.section(name, optional=True)
    if mapping is None:
        return {}
    values: dict[str, float] = {}
    for metric in mapping.data:
        if metric not in checked:
            mapping.fail(metric, "no check uses this metric", "fix the name or remove it")
        values[metric] = (mapping.integer(metric, minimum=1, fix="write the number of eval items, e.g. 200")
                          if integer else mapping.number(metric, positive=True,
                                                         fix="write a positive number in the metric's units"))
    return values


def _calibration(sec: Section | None, checked: set[str]) -> CalibrationSpec | None:
    if sec is None:
        return None
    sec.check_keys(required=(), optional=("runs", "margin", "relative_floor", "binomial_z", "floors",
                                          "eval_set_size", "false_alarm_budget", "floor_headroom"))
    defaults = CalibrationSpec()
    return CalibrationSpec(
        runs=sec.integer("runs", minimum=2, default=defaults.runs,
                         fix="write 2 or more (run-to-run noise needs two runs)"),
        margin=sec.number("margin", minimum=1, default=defaults.margin,
                          fix="write 1 or more (a margin below 1 flags the calibration runs themselves)"),
        relative_floor=sec.number("relative_floor", minimum=0, default=defaults.relative_floor,
                                  fix="write a fraction >= 0, e.g. 0.01"),
        binomial_z=sec.number("binomial_z", positive=True, default=defaults.binomial_z, fix="write e.g. 2"),
        floors=MappingProxyType(_metric_numbers(sec, "floors", False, checked)),
        eval_set_size=MappingProxyType(
            {k: int(v) for k, v in _metric_numbers(sec, "eval_set_size", True, checked).items()}),
        false_alarm_budget=sec.number("false_alarm_budget", positive=True, default=defaults.false_alarm_budget,
                                      fix="write a probability, e.g. 0.05"),
        floor_headroom=sec.number("floor_headroom", minimum=1, default=defaults.floor_headroom,
                                  fix="write a factor >= 1, e.g. 1000"),
    )


def load_baseline(path: str | Path, env: dict[str, str] | None = None) -> Baseline:
    """Load and validate a baseline YAML; every mistake is one UsageError naming file and key."""
    path = Path(path)
    sec = load_section(path, what="a baseline", doc=_DOC, required=("golden", "checks"), optional=(
        "schema_version", "name", "description", "metric_aliases", "short_names", "steps", "calibrated_range",
        "wall_time", "provenance", "calibration", "preset", "roles"))
    version = sec.integer("schema_version", default=SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        sec.fail("schema_version", f"version {version} is not supported (this rl-autotest reads {SCHEMA_VERSION})",
                 f"write {SCHEMA_VERSION}, or use the rl-autotest that wrote the file")
    golden = sec.section("golden")
    assert golden is not None
    golden.check_keys(required=(), optional=("table", "tracker", "format", "tracker_sha256", "tracker_steps", "noise"))
    if ("table" in golden.data) == ("tracker" in golden.data):
        sec.fail("golden", f"has {'both' if 'table' in golden.data else 'neither'} 'table' and 'tracker'",
                 "give exactly one: table (metric -> {step: value}) or tracker (a path)")
    table = None
    tracker = None
    noise = None
    if "noise" in golden.data:
        noise_sec = golden.section("noise")
        assert noise_sec is not None
        noise = MappingProxyType(parse_step_table(noise_sec))
    if "table" in golden.data:
        table_sec = golden.section("table")
        assert table_sec is not None
        table = parse_step_table(table_sec)
    else:
        tracker = Path(expand_env(golden.text("tracker"), f"{path}: golden.tracker", env))
        if not tracker.is_absolute():
            tracker = (path.parent / tracker).resolve()
    pin = golden.text("tracker_sha256", default=None)
    if pin is not None and (tracker is None or not re.fullmatch(r"[0-9a-f]{64}", pin)):
        golden.fail("tracker_sha256", f"{show(pin)} is not the sha256 of a golden tracker",
                    "write the 64 lowercase hex digits of `sha256sum <tracker>` next to golden.tracker")
    pin_steps = (golden.integer("tracker_steps", minimum=1, fix="write the tracker's number of training steps")
                 if "tracker_steps" in golden.data else None)
    raw_checks = sec.get("checks")
    if not isinstance(raw_checks, list) or not raw_checks:
        sec.fail("checks", f"{show(raw_checks)} is not a non-empty list",
                 "write one mapping per check: {metric, method, operator, threshold}")
    checks = tuple(_check(Section(item, path, f"checks[{i}]", doc=_DOC)) for i, item in enumerate(raw_checks))
    seen: set[str] = set()
    for i, check in enumerate(checks):
        if check.check_id in seen:
            sec.fail(f"checks[{i}]", f"duplicate check {check.check_id}", "merge or remove one")
        seen.add(check.check_id)
    if all(check.severity == "reference" for check in checks):
        # reference checks never fail: a baseline of only those would pass any run without a word
        sec.fail("checks", "every check is severity: reference, so nothing gates the run",
                 "make at least one check severity: gate (the default)")
    if table is not None:
        check_golden_keys(golden, table, sorted({c.metric for c in checks if c.method != "value"}))

    steps = StepPolicy()
    steps_sec = sec.section("steps", optional=True)
    if steps_sec is not None:
        steps_sec.check_keys(required=("expected",), optional=("exact",))
        expected = steps_sec.integer("expected", minimum=1, fix="write the number of training steps, e.g. 45")
        steps = StepPolicy(expected=expected, exact=steps_sec.boolean("exact", default=False))
    wall_sec = sec.section("wall_time", optional=True)
    if wall_sec is not None:
        wall_sec.check_keys(required=("max_s",), optional=("overrides",))
    provenance = sec.section("provenance", optional=True)
    preset, roles = parse_roles(sec, {c.metric for c in checks})
    return Baseline(
        name=sec.text("name", path.stem),
        path=path,
        checks=checks,
        golden_table=MappingProxyType(table) if table is not None else None,
        golden_tracker=tracker,
        golden_format=golden.text("format", "auto"),
        golden_tracker_sha256=pin,
        golden_tracker_steps=pin_steps,
        metric_aliases=MappingProxyType(sec.str_map("metric_aliases", default={})),
        short_names=MappingProxyType(sec.str_map("short_names", default={})),
        steps=steps,
        calibrated_range=_step_range(sec, "calibrated_range") if "calibrated_range" in sec.data else None,
        wall_time_max_s=wall_sec.number("max_s", positive=True, fix="write seconds, e.g. 2400") if wall_sec else None,
        wall_time_overrides=parse_overrides(wall_sec, "max_s", positive=True) if wall_sec else (),
        provenance=MappingProxyType(provenance.data if provenance else {}),
        description=sec.text("description", ""),
        calibration=_calibration(sec.section("calibration", optional=True), {c.metric for c in checks}),
        noise_table=noise,
        preset=preset,
        roles=MappingProxyType(roles),
    )


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
