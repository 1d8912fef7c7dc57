"""The one result model: per-check results, triage findings and the run verdict.

Markdown, JSON, plots and the CI step summary only render these objects.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Iterator

from autotest.inputs.roles import group_of

if TYPE_CHECKING:  # judge.spec_diff reads the baseline model, which reaches the check kinds
    from autotest.judge.spec_diff import SpecComparison

RESULTS_SCHEMA_VERSION = 1

PASS, FAIL, ERROR, INFO = "PASS", "FAIL", "ERROR", "INFO"
STATUSES = (PASS, FAIL, ERROR, INFO)
#: the cause of a gate undecided because of the machine (CheckResult.cause)
ENVIRONMENT = "environment"
#: role groups whose gates are not accuracy gates (named apart in the verdict line)
NON_ACCURACY_GROUPS = ("performance", "memory")


@dataclass(frozen=True)
class StepPoint:
    """One compared point: the real step, both values, the error and whether it breached."""

    step: int
    current: float | None
    baseline: float | None
    error: float | None
    breached: bool


@dataclass(frozen=True)
class Points:
    """Compared points of one check, stored by column (a check may cover thousands of steps).

    A non-finite ``error`` marks a point that could not be scored: a non-finite current value
    (``breached``) or a non-finite golden value (the baseline is broken; not breached).
    """

    steps: tuple[int, ...] = ()
    current: tuple[float, ...] = ()
    baseline: tuple[float | None, ...] = ()
    error: tuple[float, ...] = ()
    breached: tuple[bool, ...] = ()

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self) -> Iterator[StepPoint]:
        for i in range(len(self.steps)):
            yield self[i]

    def __getitem__(self, index: int) -> StepPoint:
        return StepPoint(self.steps[index], self.current[index], self.baseline[index], self.error[index],
                         self.breached[index])

    def at(self, step: int | None) -> StepPoint | None:
        if step is None or step not in self.steps:
            return None
        return self[self.steps.index(step)]

    def breaches(self) -> list[StepPoint]:
        return [self[i] for i, b in enumerate(self.breached) if b]

    def to_dict(self, max_points: int = 500) -> dict[str, Any]:
        """Columns of every point; a long passing check keeps only its breaches (the tracker has the rest)."""
        if len(self.steps) > max_points:
            keep = [i for i, b in enumerate(self.breached) if b][:max_points]
            subset = Points(*(tuple(column[i] for i in keep) for column in
                              (self.steps, self.current, self.baseline, self.error, self.breached)))
            data = subset.to_dict(max_points)
            data["omitted"] = f"{len(self.steps) - len(keep)} of {len(self.steps)} points (within threshold)"
            return data

        def clean(values):
            if None not in values and all(map(math.isfinite, values)):
                return list(values)
            return [v if v is None or math.isfinite(v) else str(v) for v in values]

        return {"steps": list(self.steps), "current": clean(self.current), "baseline": clean(self.baseline),
                "error": clean(self.error), "breached_steps": [s for s, b in zip(self.steps, self.breached) if b]}


@dataclass(frozen=True)
class CheckResult:
    check_id: str
    status: str
    message: str
    kind: str = "metric"  # metric | structural
    metric: str | None = None
    method: str | None = None
    operator: str | None = None
    threshold: float | None = None
    scope: str | None = None
    severity: str = "gate"
    #: the number compared with the threshold (worst step error, pN, final error, window error)
    observed: float | None = None
    first_breach_step: int | None = None
    worst_step: int | None = None
    points: Points = Points()
    #: every parameter the check used, defaults included, so nothing is hidden
    parameters: dict[str, Any] = field(default_factory=dict)
    derivation: str = ""
    #: the smallest constant change of the metric this gate catches with 80% power (autotest.judge.power),
    #: in the metric's units (a share of golden for a relative check), and as a share of |golden|
    mde: float | None = None
    mde_share: float | None = None
    #: the steps ``(first, last)`` the MDE's shift must hold over (a window gate's window; a whole-run gate's whole
    #: run): a change acting on fewer of them is diluted, and this MDE is not what the gate catches of it
    mde_steps: tuple[int, int] | None = None
    #: False for a gate the case marks non-blocking (``performance.blocking: false``): judged, reported and
    #: recorded with its real status, never deciding the run
    blocking: bool = True
    #: why a gate could not decide when the cause is outside the code: ``environment`` (runner contention)
    cause: str = ""

    @property
    def is_gate(self) -> bool:
        """A check that decides the run: a gate, and blocking."""
        return self.severity == "gate" and self.blocking

    @property
    def is_environment(self) -> bool:
        """An undecided gate whose cause is the machine it ran on, not the code (retry it on a quiet runner)."""
        return self.status == ERROR and self.cause == ENVIRONMENT


@dataclass(frozen=True)
class TriageFinding:
    rule: str
    suggestion: str
    evidence: str
    primary: bool = False
    #: 1 = primary; every rule that fits is shown, in the order of the rule table
    rank: int = 1
    #: why this rule yields to those ranked above it (empty for the primary)
    why_ranked: str = ""
    #: the runner-up rule the evidence cannot tell from this one (the primary of an uncertain triage), and the check
    #: that would tell them apart
    uncertain_with: str = ""
    to_tell: str = ""

    @property
    def next_step(self) -> str:
        """The one next-step line a console, a pytest failure and a step summary show: the suggestion, or, when the
        evidence cannot tell this rule from the runner-up, both rules and the check that tells them apart (each
        rule's own suggestion is in the report's ranked list; pasting both here made one 100-word sentence)."""
        if self.uncertain_with:
            return f"{self.rule} or {self.uncertain_with}, which the evidence does not tell apart; {self.to_tell}"
        return self.suggestion


@dataclass(frozen=True)
class RoleEvidence:
    """What the gates of one role showed over the whole run."""

    role: str
    group: str
    metrics: tuple[str, ...]
    #: gate checks of this role that decided (PASS or FAIL)
    gates: int
    #: the failed gate checks, earliest breach first
    breached: tuple[str, ...] = ()
    first_breach_step: int | None = None
    #: a breached value was NaN/inf
    non_finite: bool = False
    #: gate checks that could not decide (ERROR)
    undecided: int = 0

    @property
    def in_bounds(self) -> bool:
        """Checked, and every gate check passed: within bounds at every step it covers."""
        return self.gates > 0 and not self.breached and not self.undecided

    def describe(self) -> str:
        if self.breached:
            step = f" from step {self.first_breach_step}" if self.first_breach_step is not None else ""
            return f"{self.role} breached{step} ({self.breached[0]})"
        if self.in_bounds:
            return f"{self.role} within bounds at every step ({self.gates} gate check{'s' * (self.gates > 1)})"
        if self.undecided:
            return f"{self.role} undecided ({self.undecided} check{'s' * (self.undecided > 1)} could not decide)"
        return f"{self.role} not checked"


@dataclass(frozen=True)
class Measured:
    """One reading taken for a hypothesis the role rows cannot tell (a unit change, a changed run shape):
    what was measured, whether it holds, and the numbers (report.md's hypothesis evidence table)."""

    hypothesis: str
    measured: str
    holds: bool
    finding: str
    #: named numbers a rule's suggestion is filled with (``{steps}``, ``{factor}``, ...)
    values: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Replicate:
    """One of the K runs behind a replicate-mean verdict; its own verdict and logs are in ``folder``."""

    index: int
    seed: int
    folder: str
    #: its own verdict (one run, calibrated thresholds unscaled)
    status: str
    #: how its process ended: "0", "1", "SIGKILL", "timed out", "not launched"
    exit: str
    wall_s: float | None
    #: whether its trace is part of the mean (a crashed or stopped replicate is not)
    averaged: bool
    #: check_id -> the value its own verdict compared with the threshold
    observed: dict[str, float | None] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"r{self.index}-seed{self.seed}"


#: ``VerdictCost.basis`` -> the short unit a console line prints (results.json before bases: device-s)
COST_UNITS = {"gpu-seconds": "GPU-s", "cpu-seconds": "CPU-s", "core-seconds": "core-s"}


@dataclass(frozen=True)
class VerdictCost:
    """What a verdict cost: ``context.cost`` (autotest.report.cost writes it; a replicate mean sums its runs)."""

    device_seconds: float
    #: gpu-seconds, cpu-seconds or core-seconds; several joined with " + "; empty for a results.json before bases
    basis: str = ""
    #: the quantity in words (``GPU-seconds: wall 101.6 s x 8 GPUs``)
    quantity: str = ""
    runs: int = 1

    @property
    def unit(self) -> str:
        return COST_UNITS.get(self.basis, "device-s")

    def short(self) -> str:
        """``812.5 GPU-s``; under one second two significant digits (``0.036 CPU-s``)."""
        seconds = self.device_seconds
        return f"{seconds:.1f} {self.unit}" if seconds >= 1 or seconds == 0 else f"{seconds:.2g} {self.unit}"


@dataclass(frozen=True)
class Verdict:
    status: str
    case: str
    results: tuple[CheckResult, ...]
    triage: tuple[TriageFinding, ...] = ()
    current_source: str = ""
    baseline_source: str = ""
    baseline_file: str = ""
    warnings: tuple[str, ...] = ()
    #: run context: commit under test, log paths, wall time, launch status ... (rendered as is)
    context: dict[str, Any] = field(default_factory=dict)
    #: the runs whose mean was judged (empty for a single run)
    replicates: tuple[Replicate, ...] = ()
    #: the factor applied to pooled thresholds for that mean (None for a single run)
    pooled_threshold_scale: float | None = None
    #: what triage read, per metric role: autotest.judge.evidence.RoleEvidence rows
    evidence: tuple[RoleEvidence, ...] = ()
    #: where the metric roles came from (declared, preset named or inferred)
    roles_note: str = ""
    #: checked metric -> its role (autotest.inputs.roles); metrics without a role are absent
    metric_roles: dict[str, str] = field(default_factory=dict)
    #: what was measured for each hypothesis beyond the role rows (autotest.judge.readings.hypothesis_evidence)
    measured: tuple[Measured, ...] = ()
    #: the framework's own spec for the case at the commit under test, against the baseline (None: the case names none)
    framework_spec: SpecComparison | None = None

    @property
    def cost(self) -> VerdictCost | None:
        """The verdict's cost, typed (None: judged offline, or a results.json written before costs)."""
        cost = self.context.get("cost")
        value = cost.get("device_seconds") if isinstance(cost, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        runs = cost.get("runs", 1)
        return VerdictCost(float(value), str(cost.get("basis") or ""), str(cost.get("quantity") or ""),
                           runs if isinstance(runs, int) and not isinstance(runs, bool) else 1)

    def failing(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if r.status in (FAIL, ERROR))

    @property
    def environment_only(self) -> bool:
        """An ERROR whose every undecided gate is undecided because of the machine (an environment outcome:
        retried, never merged; exit 75)."""
        errors = [r for r in self.results if r.is_gate and r.status == ERROR]
        return self.status == ERROR and bool(errors) and all(r.is_environment for r in errors)

    def deciding_kind(self) -> str:
        """Which kind of gate decided a FAIL or an ERROR: ``accuracy``, ``performance``, ``memory``, a structural
        check's kind (``run``, ``resume``, ...), or ``environment``; empty for a PASS."""
        status = self.status
        if status == PASS:
            return ""
        if self.environment_only:
            return ENVIRONMENT
        deciding = [r for r in self.results if r.is_gate and r.status == status]
        kinds: list[str] = []
        for r in deciding:
            group = group_of(self.metric_roles.get(r.metric or "")) if r.metric else None
            kind = (("resume" if r.check_id.startswith("resume") else "run") if r.kind == "structural"
                    else group if group in NON_ACCURACY_GROUPS else "accuracy")
            if kind not in kinds:
                kinds.append(kind)
        return " and ".join(kinds)

    def to_dict(self) -> dict[str, Any]:
        results = []
        for r in self.results:
            # mde_steps only beside an MDE: a bound, a structural result or an uncalibrated gate has none
            item = _json_safe({f.name: getattr(r, f.name) for f in fields(r) if f.name != "points"
                               and (f.name != "mde_steps" or r.mde_steps is not None)})
            item["points"] = r.points.to_dict()
            results.append(item)
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "results"}
        data["triage"] = [asdict(t) for t in self.triage]
        data["replicates"] = [asdict(r) for r in self.replicates]
        data["evidence"] = [asdict(e) for e in self.evidence]
        data["measured"] = [asdict(m) for m in self.measured]
        data["framework_spec"] = self.framework_spec.to_dict() if self.framework_spec is not None else None
        data = _json_safe(data)
        data["results"] = results
        data["schema_version"] = RESULTS_SCHEMA_VERSION
        return data


def decide_status(results: tuple[CheckResult, ...] | list[CheckResult]) -> str:
    """FAIL if any gate failed, else ERROR if any gate could not be decided, else PASS."""
    gates = [r for r in results if r.is_gate]
    if any(r.status == FAIL for r in gates):
        return FAIL
    if any(r.status == ERROR for r in gates):
        return ERROR
    return PASS


def _json_safe(value: Any) -> Any:
    """JSON has no NaN/inf: write them as strings so results.json stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value
