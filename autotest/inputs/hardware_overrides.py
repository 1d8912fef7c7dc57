"""Per-hardware thresholds: a machine-dependent check (time/step, wall time) may differ by GPU model and count.

A baseline's check (or its ``wall_time``) may carry::

    overrides:
      - {hardware: {gpu: "H200", count: 8}, threshold: 15}     # wall_time: max_s instead of threshold

The seed's value stays the default; the preflight's GPU fingerprint (model names from ``nvidia-smi -L``
and the count) picks the first override whose ``gpu`` words all appear in a model name ("H200" matches
"NVIDIA H200" but not "NVIDIA H20") and whose ``count``, when given, equals the node's. The card and
the report say which override applied. Reading the ``overrides:`` lists is :mod:`autotest.inputs.override_section`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any



@dataclass(frozen=True)
class HardwareOverride:
    """``value`` replaces the default on nodes with ``gpu`` (words of the model name) x ``count`` (None: any)."""

    gpu: str
    count: int | None
    value: float

    def describe(self) -> str:
        return f"{self.count} x {self.gpu}" if self.count is not None else f"{self.gpu} (any count)"

    def matches(self, models: Iterable[str], count: int) -> bool:
        wanted = words(self.gpu)
        return (self.count is None or self.count == count) and any(wanted <= words(m) for m in models)


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def pick(overrides: Iterable[HardwareOverride], gpu: Mapping[str, Any] | None) -> HardwareOverride | None:
    """The first override matching the preflight's GPU fingerprint (``{"models": [...], "count": n}``)."""
    models = tuple((gpu or {}).get("models") or ())
    count = int((gpu or {}).get("count") or 0)
    return next((o for o in overrides if o.matches(models, count)), None)
