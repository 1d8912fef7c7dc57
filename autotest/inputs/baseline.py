"""Golden baselines: golden values, the checks to run against them, and their provenance.

One YAML file per case in ``baselines/<case>.yaml``, validated on load like a case file (see
``autotest.inputs.schema``): every mistake is one line naming the file and the dotted key. Every parameter
a check uses is explicit in the file or shown with its default in the report.

The keys, their types, defaults, ranges and cross-field rules are declared once in
:mod:`autotest.inputs.baseline_schema` (docs/baselines.md's key table is generated from it); this module reads a
file against that declaration and builds the frozen :class:`~autotest.inputs.baseline_model.Baseline`.
"""

from __future__ import annotations

import math
import re
from dataclasses import fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from autotest.errors import UsageError
from autotest.inputs.baseline_model import PLACEHOLDER, SCHEMA_VERSION, Baseline, CalibrationSpec, CheckSpec, StepPolicy
from autotest.inputs.baseline_schema import BY_PATH, check_section, keys_of, read
from autotest.inputs.golden_table import check_golden_keys, parse_step_table
from autotest.inputs.override_section import parse_overrides
from autotest.inputs.paired_section import parse_paired
from autotest.inputs.roles import parse_roles
from autotest.inputs.schema import Section, expand_env, load_section, show
from autotest.scopes import Scope, find, plugin_of, unknown
from autotest.scopes import kinds as scope_kinds
from autotest.scopes.window import step_range

# Baseline, CheckSpec and CalibrationSpec are imported from here across the harness and its tests
__all__ = ["Baseline", "CalibrationSpec", "CheckSpec", "load_baseline"]

_DOC = "docs/baselines.md"
#: keys every check may have (autotest.inputs.baseline_schema); each kind adds its own (autotest.scopes)
_REQUIRED, _CHECK_KEYS = keys_of("checks[]")
_SPEC_FIELDS = {f.name for f in fields(CheckSpec)}


def _check(sec: Section) -> CheckSpec:
    kind = find(sec.get("scope", "stepwise"))
    kinds = scope_kinds(key for key in sec.data if key not in _REQUIRED + _CHECK_KEYS)
    own_keys = tuple(dict.fromkeys(key for k in kinds for key in k.keys))
    sec.check_keys(required=_REQUIRED, optional=_CHECK_KEYS + own_keys)
    if kind is None:
        sec.fail("scope", *unknown(sec.get("scope")))
    scope_fields = _scope_fields(sec, kind)
    for other in kinds:
        for key in other.exclusive_keys if other is not kind else ():
            if key in sec.data:
                sec.fail(key, f"only applies to scope {other.name!r}, not {kind.name!r}",
                         f"remove it or set scope: {other.name}")
    method = read(sec, "checks[].method")
    operator = read(sec, "checks[].operator")
    placeholder = sec.get("threshold") == BY_PATH["checks[].threshold"].also
    if placeholder:
        threshold = math.nan
    else:
        threshold = read(sec, "checks[].threshold")
        _check_sign(sec, method, operator, threshold)
    overrides = parse_overrides(sec, "checks[].overrides[]",
                                validate=lambda entry, value: _check_sign(entry, method, operator, value))
    return CheckSpec(
        metric=sec.text("metric"),
        method=method,
        operator=operator,
        threshold=threshold,
        scope=kind.name,
        severity=read(sec, "checks[].severity"),
        relative_floor=read(sec, "checks[].relative_floor"),
        derivation=read(sec, "checks[].derivation"),
        measured_max_deviation=read(sec, "checks[].measured_max_deviation"),
        overrides=overrides,
        placeholder=placeholder,
        **scope_fields,
    )


def _scope_fields(sec: Section, kind: Scope) -> dict[str, Any]:
    """The kind's fields of the spec; a third-party kind that raises or returns no spec field is one line."""
    plugin = plugin_of(kind)
    if plugin is None:
        return kind.parse(sec)
    try:
        found = kind.parse(sec)
    except UsageError:
        raise
    except Exception as exc:
        sec.fail("scope", f"check kind plugin {plugin} failed to read the check: {type(exc).__name__}: {exc}",
                 "fix or uninstall the package that provides it")
    unknown_fields = set(found) - _SPEC_FIELDS
    if unknown_fields:
        sec.fail("scope", f"check kind plugin {plugin} returned {', '.join(sorted(unknown_fields))}, no field of a "
                          "check", "its parse returns check fields, its own keys as options=((key, value), ...)")
    return found


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
    check_section(sec, "calibration")
    return CalibrationSpec(
        runs=read(sec, "calibration.runs"),
        margin=read(sec, "calibration.margin"),
        relative_floor=read(sec, "calibration.relative_floor"),
        binomial_z=read(sec, "calibration.binomial_z"),
        floors=MappingProxyType(_metric_numbers(sec, "floors", False, checked)),
        eval_set_size=MappingProxyType(
            {k: int(v) for k, v in _metric_numbers(sec, "eval_set_size", True, checked).items()}),
        false_alarm_budget=read(sec, "calibration.false_alarm_budget"),
        floor_headroom=read(sec, "calibration.floor_headroom"),
    )


def last_step(steps: StepPolicy, tracker_steps: int | None, table: dict | None) -> int | None:
    """The baseline's last training step: declared (steps.expected, golden.tracker_steps), else the golden table's
    last; None when the file does not say (a golden tracker without a pin)."""
    if steps.expected is not None or tracker_steps is not None:
        return steps.expected or tracker_steps
    return max((step for series in (table or {}).values() for step in series), default=None)


def load_baseline(path: str | Path, env: dict[str, str] | None = None) -> Baseline:
    """Load and validate a baseline YAML; every mistake is one UsageError naming file and key."""
    path = Path(path)
    sec = load_section(path, what="a baseline", doc=_DOC)
    check_section(sec, "")
    version = read(sec, "schema_version")
    if version != SCHEMA_VERSION:
        sec.fail("schema_version", f"version {version} is not supported (this rl-autotest reads {SCHEMA_VERSION})",
                 f"write {SCHEMA_VERSION}, or use the rl-autotest that wrote the file")
    golden = sec.section("golden")
    assert golden is not None
    check_section(golden, "golden")
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
    roughness = None
    if "roughness" in golden.data:
        rough_sec = golden.section("roughness")
        assert rough_sec is not None
        roughness = MappingProxyType({metric: rough_sec.number(metric, positive=True, fix="write the calibration "
                                                               "runs' least roughness, e.g. 0.7")
                                      for metric in rough_sec.data})
    if "table" in golden.data:
        table_sec = golden.section("table")
        assert table_sec is not None
        table = parse_step_table(table_sec)
    else:
        tracker = Path(expand_env(golden.text("tracker"), f"{path}: golden.tracker", env))
        if not tracker.is_absolute():
            tracker = (path.parent / tracker).resolve()
    pin = read(golden, "golden.tracker_sha256")
    if pin is not None and (tracker is None or not re.fullmatch(r"[0-9a-f]{64}", pin)):
        golden.fail("tracker_sha256", f"{show(pin)} is not the sha256 of a golden tracker",
                    "write the 64 lowercase hex digits of `sha256sum <tracker>` next to golden.tracker")
    pin_steps = read(golden, "golden.tracker_steps")
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
    if not any(check.severity == "gate" for check in checks):
        # reference and shadow checks never fail the run: a baseline of only those would pass any run without a word
        kinds = sorted({check.severity for check in checks})
        every = f"severity: {kinds[0]}" if len(kinds) == 1 else "severity: reference or shadow"
        sec.fail("checks", f"every check is {every}, so nothing gates the run",
                 "make at least one check severity: gate (the default)")
    if table is not None:
        check_golden_keys(golden, table, sorted({c.metric for c in checks if c.method != "value"}))

    steps = StepPolicy()
    steps_sec = sec.section("steps", optional=True)
    if steps_sec is not None:
        check_section(steps_sec, "steps")
        steps = StepPolicy(expected=read(steps_sec, "steps.expected"), exact=read(steps_sec, "steps.exact"))
    wall_sec = sec.section("wall_time", optional=True)
    if wall_sec is not None:
        check_section(wall_sec, "wall_time")
    provenance = sec.section("provenance", optional=True)
    preset, roles = parse_roles(sec, {c.metric for c in checks})
    paired_sec = sec.section("paired", optional=True)
    return Baseline(
        name=sec.text("name", path.stem),
        path=path,
        checks=checks,
        golden_table=MappingProxyType(table) if table is not None else None,
        golden_tracker=tracker,
        golden_format=read(golden, "golden.format"),
        golden_tracker_sha256=pin,
        golden_tracker_steps=pin_steps,
        metric_aliases=MappingProxyType(sec.str_map("metric_aliases", default={})),
        short_names=MappingProxyType(sec.str_map("short_names", default={})),
        steps=steps,
        calibrated_range=step_range(sec, "calibrated_range") if "calibrated_range" in sec.data else None,
        wall_time_max_s=read(wall_sec, "wall_time.max_s") if wall_sec else None,
        wall_time_overrides=parse_overrides(wall_sec, "wall_time.overrides[]") if wall_sec else (),
        provenance=MappingProxyType(provenance.data if provenance else {}),
        description=read(sec, "description"),
        calibration=_calibration(sec.section("calibration", optional=True), {c.metric for c in checks}),
        noise_table=noise,
        roughness=roughness,
        preset=preset,
        roles=MappingProxyType(roles),
        paired=parse_paired(paired_sec, {c.metric for c in checks}, last_step(steps, pin_steps, table))
        if paired_sec is not None else None,
    )
