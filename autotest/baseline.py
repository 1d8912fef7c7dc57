"""Golden baselines: golden values, the checks to run against them, and their provenance.

A baseline YAML (``baselines/<case>.yaml``) holds either a golden ``table``
(metric -> {step: value}) or a reference ``tracker`` path (``${ENV}`` expanded), the checks,
a metric mapping, the expected step count, the calibrated step range and provenance.
Every parameter a check uses is explicit in the file or shown with its default in the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from autotest.errors import UsageError
from autotest.schema import Section, expand_env, load_yaml

SCHEMA_VERSION = 1
METHODS = ("absolute", "relative", "slowdown", "value")
OPERATORS = ("<", "<=", ">", ">=")
SCOPES = ("stepwise", "percentile", "final", "points", "window")
SEVERITIES = ("gate", "reference")
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

    @property
    def check_id(self) -> str:
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
        severity = "" if self.severity == "gate" else " (reference only, never fails)"
        return f"{self.metric}: {self.method} {self.operator} {self.threshold:g}, {scope}{severity}"


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


@dataclass(frozen=True)
class Baseline:
    name: str
    path: Path
    checks: tuple[CheckSpec, ...]
    golden_table: Mapping[str, Mapping[int, float]] | None = None
    golden_tracker: Path | None = None
    golden_format: str = "auto"
    metric_aliases: Mapping[str, str] = field(default_factory=dict)
    short_names: Mapping[str, str] = field(default_factory=dict)
    steps: StepPolicy = StepPolicy()
    calibrated_range: tuple[int, int] | None = None
    wall_time_max_s: float | None = None
    provenance: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    calibration: CalibrationSpec | None = None

    @property
    def golden_source(self) -> str:
        return str(self.golden_tracker) if self.golden_tracker else f"{self.path} (golden table)"

    def display(self, metric: str) -> str:
        for short, full in self.short_names.items():
            if full == metric:
                return f"{short} ({metric})"
        return metric


def _check(item: Any, path: Path, index: int) -> CheckSpec:
    sec = Section(item, path, f"checks[{index}]")
    sec.reject_unknown(
        {"metric", "method", "operator", "threshold", "scope", "severity", "percentile", "points", "window",
         "relative_floor", "derivation", "measured_max_deviation"}
    )
    scope = sec.string("scope", "stepwise", SCOPES)
    percentile = None
    if scope == "percentile":
        percentile = sec.number("percentile")
        if not 0 <= percentile <= 100:
            raise sec.error(f"must be within 0..100, got {percentile:g}", "percentile")
    elif sec.has("percentile"):
        raise sec.error("only applies to scope 'percentile'", "percentile")
    points: tuple[int, ...] = ()
    if scope == "points":
        raw = sec.required("points")
        if not isinstance(raw, list) or not raw or not all(isinstance(p, int) and not isinstance(p, bool) for p in raw):
            raise sec.error("must be a non-empty list of integer steps", "points")
        points = tuple(sorted(set(raw)))
    window = None
    if scope == "window":
        raw = sec.required("window")
        if not (isinstance(raw, list) and len(raw) == 2 and all(isinstance(p, int) for p in raw) and raw[0] <= raw[1]):
            raise sec.error("must be [first_step, last_step] with first <= last", "window")
        window = (raw[0], raw[1])
    measured = sec.raw("measured_max_deviation")
    if measured is not None:
        measured = sec.number("measured_max_deviation")
    threshold = sec.number("threshold")
    relative_floor = sec.number("relative_floor", DEFAULT_RELATIVE_FLOOR)
    if relative_floor <= 0:
        raise sec.error("must be > 0", "relative_floor")
    return CheckSpec(
        metric=sec.string("metric"),
        method=sec.string("method", choices=METHODS),
        operator=sec.string("operator", choices=OPERATORS),
        threshold=threshold,
        scope=scope,
        severity=sec.string("severity", "gate", SEVERITIES),
        percentile=percentile,
        points=points,
        window=window,
        relative_floor=relative_floor,
        derivation=sec.string("derivation", ""),
        measured_max_deviation=measured,
    )


def _golden_table(sec: Section) -> dict[str, Mapping[int, float]]:
    table: dict[str, Mapping[int, float]] = {}
    for metric, values in sec.data.items():
        where = sec.dotted(str(metric))
        if not isinstance(values, dict):
            raise UsageError(f"{sec.path}: {where}: must map step -> value")
        series: dict[int, float] = {}
        for step, value in values.items():
            if isinstance(step, bool) or not isinstance(step, int):
                raise UsageError(f"{sec.path}: {where}: step {step!r} must be an integer")
            if isinstance(value, str) and value.lower() in {"nan", ".nan", "inf", "-inf"}:
                value = float(value)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UsageError(f"{sec.path}: {where}.{step}: value must be a number, got {value!r}")
            series[step] = float(value)
        table[str(metric)] = MappingProxyType(dict(sorted(series.items())))
    return table


def _metric_numbers(sec: Section, name: str, integer: bool, checked: set[str]) -> dict[str, float]:
    mapping = sec.section(name)
    if mapping is None:
        return {}
    values: dict[str, float] = {}
    for metric in mapping.data:
        if metric not in checked:
            raise mapping.error("no check uses this metric; fix the name or remove it", str(metric))
        value = mapping.integer(str(metric)) if integer else mapping.number(str(metric))
        if value <= 0:
            raise mapping.error(f"must be > 0, got {value:g}", str(metric))
        values[str(metric)] = value
    return values


def _calibration(sec: Section | None, checked: set[str]) -> CalibrationSpec | None:
    if sec is None:
        return None
    sec.reject_unknown({"runs", "margin", "relative_floor", "binomial_z", "floors", "eval_set_size"})
    defaults = CalibrationSpec()
    runs = sec.integer("runs", defaults.runs)
    if runs < 2:
        raise sec.error(f"must be >= 2 (run-to-run noise needs two runs), got {runs}", "runs")
    margin = sec.number("margin", defaults.margin)
    if margin < 1:
        raise sec.error(f"must be >= 1 (a margin below 1 flags the calibration runs themselves), got {margin:g}",
                        "margin")
    relative_floor = sec.number("relative_floor", defaults.relative_floor)
    if relative_floor < 0:
        raise sec.error(f"must be >= 0, got {relative_floor:g}", "relative_floor")
    z = sec.number("binomial_z", defaults.binomial_z)
    if z <= 0:
        raise sec.error(f"must be > 0, got {z:g}", "binomial_z")
    return CalibrationSpec(
        runs=runs, margin=margin, relative_floor=relative_floor, binomial_z=z,
        floors=MappingProxyType(_metric_numbers(sec, "floors", False, checked)),
        eval_set_size=MappingProxyType(
            {k: int(v) for k, v in _metric_numbers(sec, "eval_set_size", True, checked).items()}),
    )


def load_baseline(path: str | Path, env: dict[str, str] | None = None) -> Baseline:
    """Load and validate a baseline YAML; every mistake is one UsageError naming file and key."""
    path = Path(path)
    sec = Section(load_yaml(path), path)
    sec.reject_unknown(
        {"schema_version", "name", "description", "golden", "checks", "metric_aliases", "short_names", "steps",
         "calibrated_range", "wall_time", "provenance", "calibration"}
    )
    version = sec.integer("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise sec.error(f"unsupported version {version}; this rl-autotest reads {SCHEMA_VERSION}", "schema_version")
    golden = sec.section("golden", required=True)
    assert golden is not None
    golden.reject_unknown({"table", "tracker", "format"})
    if golden.has("table") == golden.has("tracker"):
        raise golden.error("give exactly one of 'table' (metric -> {step: value}) or 'tracker' (a path)")
    table = None
    tracker = None
    if golden.has("table"):
        table_sec = golden.section("table", required=True)
        assert table_sec is not None
        table = _golden_table(table_sec)
    else:
        raw_tracker = golden.string("tracker")
        expanded = expand_env(raw_tracker, f"{path}: golden.tracker", env)
        tracker = Path(expanded)
        if not tracker.is_absolute():
            tracker = (path.parent / tracker).resolve()
    raw_checks = sec.required("checks")
    if not isinstance(raw_checks, list) or not raw_checks:
        raise sec.error("must be a non-empty list of checks", "checks")
    checks = tuple(_check(item, path, i) for i, item in enumerate(raw_checks))
    seen: set[str] = set()
    for i, check in enumerate(checks):
        if check.check_id in seen:
            raise UsageError(f"{path}: checks[{i}]: duplicate check {check.check_id}; merge or remove one")
        seen.add(check.check_id)

    steps = StepPolicy()
    steps_sec = sec.section("steps")
    if steps_sec is not None:
        steps_sec.reject_unknown({"expected", "exact"})
        steps = StepPolicy(expected=steps_sec.integer("expected"), exact=steps_sec.boolean("exact", False))
    calibrated = None
    if sec.has("calibrated_range"):
        raw = sec.raw("calibrated_range")
        if not (isinstance(raw, list) and len(raw) == 2 and all(isinstance(x, int) for x in raw) and raw[0] <= raw[1]):
            raise sec.error("must be [first_step, last_step]", "calibrated_range")
        calibrated = (raw[0], raw[1])
    wall_time = None
    wall_sec = sec.section("wall_time")
    if wall_sec is not None:
        wall_sec.reject_unknown({"max_s"})
        wall_time = wall_sec.number("max_s")
    provenance = sec.raw("provenance") or {}
    if not isinstance(provenance, dict):
        raise sec.error("must be a mapping", "provenance")
    return Baseline(
        name=sec.string("name", path.stem),
        path=path,
        checks=checks,
        golden_table=MappingProxyType(table) if table is not None else None,
        golden_tracker=tracker,
        golden_format=golden.string("format", "auto"),
        metric_aliases=MappingProxyType(sec.string_map("metric_aliases")),
        short_names=MappingProxyType(sec.string_map("short_names")),
        steps=steps,
        calibrated_range=calibrated,
        wall_time_max_s=wall_time,
        provenance=MappingProxyType(provenance),
        description=sec.string("description", ""),
        calibration=_calibration(sec.section("calibration"), {c.metric for c in checks}),
    )
