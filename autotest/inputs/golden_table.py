"""A baseline's step tables: parsing ``{metric: {step: value}}`` and refusing golden metrics no check uses."""

from __future__ import annotations

import difflib
from types import MappingProxyType
from typing import Any, Mapping

from autotest.inputs.schema import Section, show


def parse_step_table(sec: Section) -> dict[str, Mapping[int, float]]:
    """``{metric: {step: value}}`` (the golden table, the noise table); NaN/inf may be written as text."""
    fix = "write whole-number steps: {step: value}, e.g. {5: 0.31}"
    table: dict[str, Mapping[int, float]] = {}
    for metric, values in sec.data.items():
        if not isinstance(values, dict):
            sec.fail(metric, f"{show(values)} is not a mapping of step to value", fix)
        series: dict[int, float] = {}
        for step, value in values.items():
            if isinstance(step, bool) or not isinstance(step, int):
                sec.fail(f"{metric}.{step}", f"step {show(step)} is not a whole number", fix)
            if isinstance(value, str) and value.lower() in {"nan", ".nan", "inf", "-inf"}:
                value = float(value.lower().replace(".", ""))
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                sec.fail(f"{metric}.{step}", f"{show(value)} is not a number", "write e.g. 0.31 (or .nan)")
            series[step] = float(value)
        table[str(metric)] = MappingProxyType(dict(sorted(series.items())))
    return table


def check_golden_keys(golden: Section, table: Mapping[str, Any], checked: list[str]) -> None:
    """A golden metric no check uses is almost always a typo of one that then has no golden value."""
    for metric in table:
        if metric not in checked:
            close = difflib.get_close_matches(metric, checked, n=1, cutoff=0.6)
            fix = f"did you mean {close[0]!r}?" if close else "fix the name to a checked metric or remove it"
            golden.fail(f"table.{metric}", "no check uses this golden metric", fix)
