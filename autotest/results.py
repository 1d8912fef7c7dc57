"""The one result model: per-check results, triage findings and the run verdict.

Markdown, JSON, plots and the CI step summary only render these objects.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

RESULTS_SCHEMA_VERSION = 1

PASS, FAIL, ERROR, INFO = "PASS", "FAIL", "ERROR", "INFO"
STATUSES = (PASS, FAIL, ERROR, INFO)


@dataclass(frozen=True)
class StepPoint:
    """One compared point: the real step, both values, the error and whether it breached."""

    step: int
    current: float | None
    baseline: float | None
    error: float | None
    breached: bool


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
    points: tuple[StepPoint, ...] = ()
    #: every parameter the check used, defaults included, so nothing is hidden
    parameters: dict[str, Any] = field(default_factory=dict)
    derivation: str = ""

    @property
    def is_gate(self) -> bool:
        return self.severity == "gate"


@dataclass(frozen=True)
class TriageFinding:
    rule: str
    suggestion: str
    evidence: str
    primary: bool = False


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

    def failing(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if r.status in (FAIL, ERROR))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["schema_version"] = RESULTS_SCHEMA_VERSION
        return _json_safe(data)


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
