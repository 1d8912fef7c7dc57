"""Per-hardware thresholds: a machine-dependent check (time/step, wall time) may differ by GPU model and count.

A baseline's check (or its ``wall_time``) may carry::

    overrides:
      - {hardware: {gpu: "H200", count: 8}, threshold: 15}     # wall_time: max_s instead of threshold

The seed's value stays the default; the preflight's GPU fingerprint (model names from ``nvidia-smi -L``
and the count) picks the first override whose ``gpu`` words all appear in a model name ("H200" matches
"NVIDIA H200" but not "NVIDIA H20") and whose ``count``, when given, equals the node's. The card and
the report say which override applied.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from autotest.inputs.schema import Section, show


@dataclass(frozen=True)
class HardwareOverride:
    """``value`` replaces the default on nodes with ``gpu`` (words of the model name) x ``count`` (None: any)."""

    gpu: str
    count: int | None
    value: float

    def describe(self) -> str:
        return f"{self.count} x {self.gpu}" if self.count is not None else f"{self.gpu} (any count)"

    def matches(self, models: Iterable[str], count: int) -> bool:
        wanted = _words(self.gpu)
        return (self.count is None or self.count == count) and any(wanted <= _words(m) for m in models)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def parse_overrides(sec: Section, value_key: str, *, positive: bool = False,
                    validate: Callable[[Section, float], None] | None = None) -> tuple[HardwareOverride, ...]:
    """``sec.overrides`` (absent: none); each entry is ``{hardware: {gpu, count}, <value_key>: number}``.

    ``validate(entry, value)`` checks a value as the default's would be (it fails through ``entry``).
    """
    raw = sec.get("overrides", None)
    if raw is None:
        return ()
    example = f'[{{hardware: {{gpu: "H200", count: 8}}, {value_key}: 15}}]'
    if not isinstance(raw, list) or not raw:
        sec.fail("overrides", f"{show(raw)} is not a non-empty list", f"write e.g. {example}")
    found: list[HardwareOverride] = []
    for i, item in enumerate(raw):
        entry = Section(item, sec.path, sec.key(f"overrides[{i}]"), doc=sec.doc)
        entry.check_keys(required=("hardware", value_key), optional=())
        hardware = entry.section("hardware")
        assert hardware is not None
        hardware.check_keys(required=("gpu",), optional=("count",))
        gpu = hardware.text("gpu")
        if not _words(gpu):
            hardware.fail("gpu", f"{show(gpu)} names no GPU model", 'write the model as nvidia-smi -L shows it, e.g. "H200"')
        count = hardware.integer("count", minimum=1, fix="write the node's GPU count, e.g. 8") \
            if "count" in hardware.data else None
        value = entry.number(value_key, positive=positive, fix=f"write a number, e.g. {value_key}: 15")
        if validate is not None:
            validate(entry, value)
        override = HardwareOverride(gpu=gpu, count=count, value=value)
        if any(_words(o.gpu) == _words(gpu) and o.count == count for o in found):
            entry.fail("hardware", f"{override.describe()} is listed twice", "keep one override per hardware")
        found.append(override)
    return tuple(found)


def pick(overrides: Iterable[HardwareOverride], gpu: Mapping[str, Any] | None) -> HardwareOverride | None:
    """The first override matching the preflight's GPU fingerprint (``{"models": [...], "count": n}``)."""
    models = tuple((gpu or {}).get("models") or ())
    count = int((gpu or {}).get("count") or 0)
    return next((o for o in overrides if o.matches(models, count)), None)
