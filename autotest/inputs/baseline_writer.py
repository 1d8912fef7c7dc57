"""Write a baseline as YAML: the inverse of :func:`autotest.inputs.baseline.load_baseline`, each section's keys in
the order :mod:`autotest.inputs.baseline_schema` declares them.

What is written reads back to the same checks, golden table and provenance (a test asserts it).
"""

from __future__ import annotations

from typing import Any

import yaml

from autotest.inputs.baseline_model import (
    DEFAULT_RELATIVE_FLOOR,
    PLACEHOLDER,
    SCHEMA_VERSION,
    Baseline,
    CalibrationSpec,
    CheckSpec,
)
from autotest.inputs.baseline_schema import in_order
from autotest.inputs.hardware_overrides import HardwareOverride
from autotest.inputs.paired_section import paired_document
from autotest.terminal import printable

GOLDEN_DIGITS = 6  # significant digits of a golden value

class _Flow(list):
    """A short list written on one line (points, windows, ranges)."""


class _FlowMap(dict):
    """A golden series written as one wrapped ``{step: value, ...}`` mapping."""


def _dumper():
    class Dumper(yaml.SafeDumper):
        pass

    Dumper.add_representer(_Flow, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))
    Dumper.add_representer(_FlowMap, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v, flow_style=True))
    return Dumper


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() and abs(value) < 1e15 else value


def _check_doc(check: CheckSpec) -> dict[str, Any]:
    doc: dict[str, Any] = {"metric": check.metric, "method": check.method, "operator": check.operator,
                           "threshold": PLACEHOLDER if check.placeholder else check.threshold,
                           "scope": check.scope}
    if check.severity != "gate":
        doc["severity"] = check.severity
    if check.percentile is not None:
        doc["percentile"] = _number(check.percentile)
    if check.points:
        doc["points"] = _Flow(check.points)
    if check.window:
        doc["window"] = _Flow(check.window)
    if check.statistic != "mean":
        doc["statistic"] = check.statistic
    if check.split_at:
        doc["split_at"] = _Flow(check.split_at)
    doc.update(check.options)
    if check.relative_floor != DEFAULT_RELATIVE_FLOOR:
        doc["relative_floor"] = check.relative_floor
    if check.measured_max_deviation is not None:
        doc["measured_max_deviation"] = check.measured_max_deviation
    if check.derivation:
        doc["derivation"] = check.derivation
    if check.overrides:
        doc["overrides"] = _overrides_doc(check.overrides, "threshold")
    return in_order(doc, "checks[]", others_after="severity")  # a kind's own keys follow the common ones


def _overrides_doc(overrides: tuple[HardwareOverride, ...], value_key: str) -> list[dict[str, Any]]:
    """Per-hardware values as written by hand: kept through a recalibration (they are not measured here)."""
    return [{"hardware": _FlowMap({"gpu": o.gpu, **({"count": o.count} if o.count is not None else {})}),
             value_key: o.value} for o in overrides]


def _calibration_doc(settings: CalibrationSpec) -> dict[str, Any]:
    doc: dict[str, Any] = {"runs": settings.runs, "margin": settings.margin,
                           "relative_floor": settings.relative_floor, "binomial_z": settings.binomial_z}
    if settings.false_alarm_budget != CalibrationSpec.false_alarm_budget:
        doc["false_alarm_budget"] = settings.false_alarm_budget
    if settings.floor_headroom != CalibrationSpec.floor_headroom:
        doc["floor_headroom"] = settings.floor_headroom
    if settings.floors:
        doc["floors"] = _FlowMap(settings.floors)
    if settings.eval_set_size:
        doc["eval_set_size"] = _FlowMap(settings.eval_set_size)
    return in_order(doc, "calibration")


def baseline_document(baseline: Baseline) -> dict[str, Any]:
    """``baseline`` as the plain mapping ``load_baseline`` reads back."""
    doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "name": baseline.name}
    if baseline.description:
        doc["description"] = baseline.description
    table = {m: _FlowMap({s: float(f"{v:.{GOLDEN_DIGITS}g}") for s, v in series.items()})
             for m, series in (baseline.golden_table or {}).items()}
    doc["golden"] = {"table": table}
    if baseline.noise_table:
        doc["golden"]["noise"] = {m: _FlowMap({s: float(f"{v:.4g}") for s, v in series.items()})
                                  for m, series in baseline.noise_table.items()}
    if baseline.roughness:
        doc["golden"]["roughness"] = _FlowMap({m: float(f"{v:.4g}") for m, v in baseline.roughness.items()})
    if baseline.metric_aliases:
        doc["metric_aliases"] = dict(baseline.metric_aliases)
    if baseline.short_names:
        doc["short_names"] = dict(baseline.short_names)
    if baseline.preset:
        doc["preset"] = baseline.preset
    if baseline.roles:
        doc["roles"] = dict(baseline.roles)
    if baseline.steps.expected is not None:
        doc["steps"] = _FlowMap(expected=baseline.steps.expected, exact=baseline.steps.exact)
    if baseline.calibrated_range is not None:
        doc["calibrated_range"] = _Flow(baseline.calibrated_range)
    if baseline.wall_time_max_s is not None:
        doc["wall_time"] = {"max_s": baseline.wall_time_max_s}
        if baseline.wall_time_overrides:
            doc["wall_time"]["overrides"] = _overrides_doc(baseline.wall_time_overrides, "max_s")
    if baseline.calibration is not None:
        doc["calibration"] = _calibration_doc(baseline.calibration)
    doc["checks"] = [_check_doc(c) for c in baseline.checks]
    if baseline.paired is not None:
        doc["paired"] = in_order(paired_document(baseline.paired, _Flow, _FlowMap), "paired")
    doc["provenance"] = _short_lists_flow(dict(baseline.provenance))
    doc["golden"] = in_order(doc["golden"], "golden")
    return in_order(doc, "")  # the declared order (autotest.inputs.baseline_schema)


def _short_lists_flow(value: Any) -> Any:
    """Lists of numbers (seeds) on one line; everything else as it is."""
    if isinstance(value, dict):
        return {k: _short_lists_flow(v) for k, v in value.items()}
    if isinstance(value, list):
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            return _Flow(value)
        return [_short_lists_flow(v) for v in value]
    return value


def baseline_yaml(baseline: Baseline, header: str = "") -> str:
    text = yaml.dump(baseline_document(baseline), Dumper=_dumper(), sort_keys=False, default_flow_style=False,
                     width=110, allow_unicode=True)
    # the header quotes user text (a case name, the calibrate command line with its paths): escaped, so a newline
    # cannot end the comment and a control character cannot make the file unloadable (YAML forbids them)
    return (f"# {printable(header)}\n" if header else "") + text
