"""What a check kind (a ``scope:``) is: the strategy the baseline loader, the check engine, calibration, power,
triage and the report ask instead of comparing scope names.

A kind owns what is specific to it: the spec keys it reads (``parse``), its check id and its one-line
description, the parameters it reports, how it scores a run (``evaluate``), whether a prefix of a run can fail
it (``decide_early``), what calibration measures and floors (``measured_points``, ``floor``, ``uses_noise``), what
``rl-autotest init`` proposes (``proposed_fields``), its MDE's steps and shift (``mde_steps``, ``signed_shift``),
what triage reads from it (``locates``) and how the report shows its statistic (``table_cells``, ``plots_band``).
The engine (:mod:`autotest.judge.checks`) owns alignment, statuses and messages common to every kind: it hands
``evaluate`` a :class:`Job` with the check's series and its tools, so a kind never builds a result itself.

The registry (:mod:`autotest.scopes`) maps each name to one instance; a third-party kind is a subclass
registered through the ``rl_autotest.checks`` entry point group.
"""

from __future__ import annotations

import math
import operator as op
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Protocol, Sequence

if TYPE_CHECKING:  # annotations only: the loader (inputs) and the engine (judge) hand these in
    from autotest.inputs.baseline_model import CheckSpec
    from autotest.inputs.schema import Section

OPERATORS: dict[str, Callable[[float, float], bool]] = {"<": op.lt, "<=": op.le, ">": op.gt, ">=": op.ge}


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return f"{value:.6g}"


def point_error(method: str, current: float, golden: float | None, relative_floor: float) -> float:
    if method == "value":
        return current
    assert golden is not None
    if method == "absolute":
        return abs(current - golden)
    if method == "relative":
        return abs(current - golden) / max(abs(golden), relative_floor)
    if method == "slowdown":
        return max(0.0, current - golden)
    raise AssertionError(f"unknown method {method}")


def passes(error: float, operator: str, threshold: float) -> bool:
    return math.isfinite(error) and OPERATORS[operator](error, threshold)


def error_name(spec: CheckSpec) -> str:
    return {"absolute": "absolute error", "relative": "relative error", "slowdown": "slowdown",
            "value": "value"}[spec.method]


def breach_message(spec: CheckSpec, point: Any, display: str) -> str:
    golden = "" if spec.method == "value" else f" vs golden {fmt(point.baseline)}"
    return (f"{display} at step {point.step}: current {fmt(point.current)}{golden}, "
            f"{error_name(spec)} {fmt(point.error)} not {spec.operator} {spec.threshold:g}")


def in_range(steps, calibrated: tuple[int, int] | None) -> list[int]:
    if calibrated is None:
        return sorted(steps)
    return sorted(s for s in steps if calibrated[0] <= s <= calibrated[1])


def steps_text(steps: Sequence[int]) -> str:
    shown = ", ".join(str(s) for s in steps[:8])
    return shown + (f", ... ({len(steps)} in all)" if len(steps) > 8 else "")


class Job(Protocol):
    """What the engine hands a kind's ``evaluate``: one check's inputs and the engine's tools."""

    display: str
    cur: Mapping[int, float]
    #: the golden series (None for ``method: value``, which has no golden)
    gold: Mapping[int, float] | None
    calibrated: tuple[int, int] | None
    #: the baseline's calibrated seed-to-seed noise of the metric (None: not calibrated)
    noise: Mapping[int, float] | None
    #: steps where the current log's step counter went back (a resumed or concatenated log)
    restarts: Sequence[int]

    def compare(self, spec: CheckSpec, steps: list[int], cur: Mapping[int, float],
                gold: Mapping[int, float] | None) -> tuple[Any, list[int], list[int]]:
        """Score ``steps``: (points, steps missing from the current run, steps whose golden is non-finite)."""

    def worst(self, points: Any, operator: str) -> Any:
        """The point farthest on the failing side of the threshold (None when there is none)."""

    def points(self, steps, current, baseline, error, breached) -> Any:
        """Compared points (columns) of a kind that scores its own way (pooled z, slope differences)."""

    def passed(self, message: str, **extra) -> Any: ...

    def fail(self, message: str, **extra) -> Any: ...

    def error(self, message: str, **extra) -> Any: ...

    def info(self, message: str, **extra) -> Any: ...

    def decide(self, ok: bool, message: str, **extra) -> Any:
        """PASS if ``ok`` else FAIL."""

    def uncalibrated(self, what: str, **extra) -> Any:
        """No golden value: a gate cannot be decided (ERROR), a reference check only informs (INFO)."""

    def evaluate(self) -> Any:
        """The complete check (the engine's, reference severity included) on the series handed in."""


class Scope:
    """One check kind; subclasses set ``name`` and override what differs from a per-step check."""

    name: ClassVar[str] = ""
    #: spec keys only this kind reads: a check of another kind that sets one is a user error
    exclusive_keys: ClassVar[tuple[str, ...]] = ()
    #: spec keys this kind reads (its own and shared ones such as ``window``)
    keys: ClassVar[tuple[str, ...]] = ()
    #: a failure's first breach step is where the run went wrong (triage localises by it)
    locates: ClassVar[bool] = False
    #: judged in units of the baseline's calibrated seed-to-seed noise (calibration measures it, power and the
    #: replicate mean scale by it)
    uses_noise: ClassVar[bool] = False
    #: the statistic is a growth per step (its MDE and floors are per step, never a share of golden)
    per_step_growth: ClassVar[bool] = False
    #: the plot overlays golden and current per step with the threshold band (False: only the curves)
    plots_band: ClassVar[bool] = True

    def parse(self, sec: Section) -> dict[str, Any]:
        """This kind's fields of the :class:`CheckSpec` from the check's section (a bad value fails there).

        Built-in kinds fill the spec's own fields (``percentile``, ``points``, ``window``, ``statistic``,
        ``split_at``); a third-party kind returns its keys' values as ``{"options": ((key, value), ...)}``, which
        the baseline writer writes back as they are."""
        return {}

    def check_id(self, spec: CheckSpec) -> str:
        return f"{spec.metric}[{spec.scope}]"

    def describe(self, spec: CheckSpec) -> str:
        """What the check covers, for the experiment card (``metric: method op threshold, <this>``)."""
        return spec.scope

    def parameters(self, spec: CheckSpec) -> dict[str, Any]:
        """This kind's parameters in the result (every one it used, defaults included)."""
        return {}

    def evaluate(self, spec: CheckSpec, job: Job) -> Any:
        raise NotImplementedError(f"scope {self.name!r} does not evaluate")

    def decide_early(self, spec: CheckSpec, job: Job) -> Any:
        """The FAIL a prefix of a run already decides (live fail-fast), or None: it waits for the end."""
        return None

    def mde_steps(self, spec: CheckSpec, golden: Mapping[int, float]) -> list[int]:
        """The golden steps the statistic spans (the scale a per-step MDE is shared by)."""
        steps = sorted(golden)
        if spec.window is not None:
            return [s for s in steps if spec.window[0] <= s <= spec.window[1]]
        return steps

    def proposed_fields(self, series: Mapping[int, float]) -> dict[str, Any]:
        """This kind's fields in a check ``rl-autotest init`` proposes for a metric logged as ``series``."""
        return {}

    def signed_shift(self, spec: CheckSpec, golden: Mapping[int, float], current: Mapping[int, float]) -> float | None:
        """A run's effect on the gate as a signed shift in the metric's units (None: its observed error is)."""
        return None

    def measured_points(self, spec: CheckSpec, logged: Mapping[int, float]) -> tuple[int, ...] | None:
        """The declared steps calibration can measure, for a kind that names its steps (None: it names none)."""
        return None

    def floor(self, spec: CheckSpec, values: Sequence[float], steps: Sequence[int], relative_floor: float
              ) -> tuple[float, str] | None:
        """Calibration's level floor for a distance check of this kind (None: the relative floor x max |golden|)."""
        return None

    def table_cells(self, result: Any, error: str, threshold: str, step: str) -> tuple[str, str, str]:
        """The report table's error, threshold and step cells of a result with an observed statistic."""
        return error, threshold, step
