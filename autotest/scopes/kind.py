"""What a check kind (a ``scope:``) is: the strategy the baseline loader, the check engine, calibration, power,
triage and the report ask instead of comparing scope names.

A kind owns what is specific to it: the spec keys it reads (``parse``), its check id and its one-line
description, the parameters it reports, how it scores a run (``evaluate``), whether a prefix of a run can fail
it (``decide_early``), how calibration sets its threshold (``calibrate``; by default the generic rule, which asks
``measured_points`` and ``floor``) and whether it measures the metric's noise (``uses_noise``), what
``rl-autotest init`` proposes (``proposed_fields``), its minimum detectable effect (``power``, ``half_power_shift``,
``measured_shift``; by default the per-step rule, which asks ``mde_steps`` and ``signed_shift``), what triage
reads from it (``locates``) and how the report shows its statistic (``table_cells``, ``plots_band``).
The engine (:mod:`autotest.judge.checks`) owns alignment, statuses and messages common to every kind: it hands
``evaluate`` a :class:`Job` with the check's series and its tools, so a kind never builds a result itself.
Calibration and power do the same with a :class:`CalibrationJob` and a :class:`PowerJob`: the kind's own rule
gets the runs (or the calibrated baseline) and the tools of the stage that asks, and ``job.default()`` is that
stage's generic rule, so a kind imports nothing from the stages above it.

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
    #: early looks at a pooled mean gate under --fail-fast: (share of the window's steps, false-alarm budget spent)
    #: each (:mod:`autotest.judge.step_looks`); empty: judged at the window's end only
    looks: Sequence[tuple[float, float]]

    def compare(self, spec: CheckSpec, steps: list[int], cur: Mapping[int, float],
                gold: Mapping[int, float] | None) -> tuple[Any, list[int], list[int]]:
        """Score ``steps``: (points, steps missing from the current run, steps whose golden is non-finite)."""

    def worst(self, points: Any, operator: str) -> Any:
        """The point farthest on the failing side of the threshold (None when there is none)."""

    def points(self, steps, current, baseline, error, breached) -> Any:
        """Compared points (columns) of a kind that scores its own way (pooled z, slope differences)."""

    def look_bound(self, alpha: float, steps: int) -> float:
        """The bound on |mean of z over ``steps`` steps| a clean run passes with chance at most ``alpha``."""

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


class CalibrationJob(Protocol):
    """What calibration (:mod:`autotest.calibration.thresholds`) hands a kind's ``calibrate``: one check's runs and
    calibration's tools. Asked only for a check calibration may set: a distance to golden (``method`` other than
    ``value``) bounded by ``<`` or ``<=``; any other threshold is kept as written."""

    #: the check's metric in each calibration run, at the steps every run logged
    runs: Sequence[Mapping[int, float]]
    #: the golden the candidate baseline keeps: the runs' mean per step
    golden: Mapping[int, float]
    #: the baseline's ``calibration:`` settings (``margin``, ``floors``, ``false_alarm_budget``, ...)
    settings: Any
    #: the gates judged in noise units (kinds with ``uses_noise``) that share the false-alarm budget
    noise_gates: int

    def default(self) -> Any:
        """The generic rule: the largest run-to-run deviation of the check's own statistic (its ``evaluate``, for
        every ordered pair of runs) x ``margin``, at least the floors (``floor``, ``calibration.floors``)."""

    def statistic(self, current: Mapping[int, float], golden: Mapping[int, float]) -> float:
        """The check's own statistic (what its ``evaluate`` reports as ``observed``) of ``current`` against
        ``golden``; a run it cannot be measured on stops calibration with one line naming it."""

    def calibrated(self, threshold: float, derivation: str, *, rule: str, measured_what: str = "",
                   per_run: Sequence[float] = (), measured: float | None = None, basis: str = "",
                   steps: Sequence[int] = ()) -> Any:
        """The check calibrated to ``threshold`` (rounded up to two significant digits), ``derivation`` saying
        how (written into the baseline); ``rule`` names it in the review report's method column,
        ``measured_what`` (e.g. ``max |loo mean z|``) what ``measured`` is, ``basis`` what the threshold is made of."""

    def uncalibrated(self, why: str) -> Any:
        """The check left uncalibrated (an uncalibrated gate cannot pass), ``why`` saying what is missing."""

    def declared_floor(self, metric: str, level: float) -> tuple[float, str] | None:
        """``calibration.floors[metric]`` capped at ``floor_headroom`` x ``level`` (the case's own level) and
        what it is made of; None when the metric has no declared floor."""

    def t_quantile(self, p: float, dof: int) -> float:
        """Student's t quantile (``p`` in (0.5, 1))."""


class PowerJob(Protocol):
    """What power (:mod:`autotest.judge.power`) hands a kind's ``power``, ``half_power_shift`` and
    ``measured_shift``: the calibrated baseline and power's tools. Asked only for a gate with a finite threshold
    that is a distance to golden (a bound, ``method: value``, has no MDE)."""

    #: the baseline as calibrated (``golden_table``, ``noise_table``, ``calibrated_range``, ``calibration``)
    baseline: Any
    #: N: the calibration runs behind the golden
    runs: int
    #: the check's golden series ({} when the baseline has none)
    golden: Mapping[int, float]
    #: the metric's calibrated seed-to-seed noise per step (None: not measured)
    noise: Mapping[int, float] | None
    #: the power every MDE is stated at (0.8), and its normal quantile z
    power_level: float
    z_power: float

    def default(self) -> Any:
        """The per-step rule: seed sd = measured max deviation / d2(N); MDE = threshold + z x sd x sqrt(1/K + 1/N)
        (None without a measured deviation or with one calibration run)."""

    def gate_power(self, mde: Callable[[int, int], float], golden_scale: float | None, basis: str,
                   relative: bool = False) -> Any:
        """The gate's MDE table: ``mde(K, N)`` in the metric's units (or a share of golden, ``relative``) for K
        replicates judged on their mean and N calibration runs; ``basis`` says how it is made."""

    def budget_quantile(self, runs: int) -> float:
        """t quantile (``runs`` - 1 dof) at 1 - budget / 2m: the baseline's false-alarm budget split over its m
        gates judged in noise units."""

    def t_quantile(self, p: float, dof: int) -> float:
        """Student's t quantile (``p`` in (0.5, 1))."""


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
    #: calibration sets a ``method: value`` bound of this kind too (``calibrate``; any other kind's bound is kept)
    calibrates_value: ClassVar[bool] = False
    #: each step is judged on its own, so any prefix of a run is judged from its first step (power by run length)
    judged_per_step: ClassVar[bool] = False

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
        """The generic calibration rule's level floor for a check of this kind (None: the relative floor x max
        |golden|)."""
        return None

    def calibrate(self, spec: CheckSpec, job: CalibrationJob) -> Any:
        """How calibration sets this kind's threshold: ``job.calibrated(...)`` or ``job.uncalibrated(why)`` for a
        rule of its own, ``job.default()`` for the generic one (max run-to-run deviation x margin, floors)."""
        return job.default()

    def power(self, spec: CheckSpec, job: PowerJob) -> Any:
        """The gate's minimum detectable effect: ``job.gate_power(...)`` for a noise model of its own, None where
        it has none, ``job.default()`` for the per-step rule (from the measured max deviation)."""
        return job.default()

    def half_power_shift(self, spec: CheckSpec, job: PowerJob) -> float:
        """The constant shift of the metric that puts the statistic at its threshold (caught about half the
        time), in the MDE's units; by default the threshold itself."""
        return spec.threshold

    def measured_shift(self, spec: CheckSpec, job: PowerJob, current: Mapping[int, float],
                       observed: float | None) -> float | None:
        """A run's effect on the gate as the constant shift that gives the same statistic, in the MDE's units;
        by default ``signed_shift``, else ``observed`` (the statistic the gate bounds)."""
        signed = self.signed_shift(spec, job.golden, current)
        return observed if signed is None else signed

    def table_cells(self, result: Any, error: str, threshold: str, step: str) -> tuple[str, str, str]:
        """The report table's error, threshold and step cells of a result with an observed statistic."""
        return error, threshold, step
