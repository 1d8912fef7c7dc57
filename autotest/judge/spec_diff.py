"""What differs between a baseline (its checks, its case's environment and timeout) and the framework's own spec.

Pure: the spec as read at the commit under test (:class:`autotest.inputs.framework_spec.FrameworkSpec`) and the
baseline's checks in, one :class:`SpecDifference` per difference out, each a sentence a maintainer reads in the
verdict ("the framework's spec checks mismatch/mismatch_k3_kl: value < 0.001, stepwise; this baseline checks it:
absolute <= 0.0001, stepwise"). :class:`SpecComparison` is what the verdict records (results.json
``framework_spec``, report.md's "The framework's own spec", the console line).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from autotest.inputs.baseline_model import GATING, Baseline, CheckSpec
from autotest.inputs.case_model import Case
from autotest.inputs.framework_spec import ABSENT, COMPARED, UNREAD, FrameworkSpec
from autotest.inputs.framework_spec_checks import as_check
from autotest.run.framework_spec_read import SpecReading
from autotest.scopes import scope_kind

# SpecComparison.state: COMPARED, ABSENT or UNREAD (autotest.inputs.framework_spec)
__all__ = ["ABSENT", "COMPARED", "UNREAD", "SpecComparison", "SpecDifference", "compare_spec",
           "spec_comparison"]


@dataclass(frozen=True)
class SpecDifference:
    """One difference: what (``check``, ``env``, ``timeout``, ``golden``), on which key, and the sentence."""

    topic: str
    key: str
    framework: str
    baseline: str
    line: str


@dataclass(frozen=True)
class SpecComparison:
    """The framework's spec for a case at the commit under test, against what the run held."""

    path: str
    case: str
    mode: str
    #: the commit the spec was read at (the commit under test); None when it is unknown
    commit: str | None
    state: str
    #: why there is nothing to compare (absent at the commit, unreadable), or "" when compared
    note: str = ""
    #: the last commit at or before ``commit`` that changed the spec file
    changed_in: str | None = None
    differences: tuple[SpecDifference, ...] = ()

    @property
    def where(self) -> str:
        return f"{self.path}@{self.commit[:12]}" if self.commit else self.path

    @property
    def followed(self) -> bool:
        """The run's gate held the spec's checks and environment (follow mode, the spec read)."""
        return self.mode == "follow" and self.state == COMPARED

    def headline(self) -> str:
        """One phrase for the console line and the step summary."""
        what = f"framework spec {self.where} (case {self.case}, {self.mode})"
        if self.state != COMPARED:
            return f"{what}: {self.note}"
        if not self.differences:
            return f"{what}: the baseline matches it"
        n = len(self.differences)
        held = "the gate held the spec's" if self.followed else "the gate held the baseline's"
        keys = ", ".join(f"{d.topic} {d.key}" for d in self.differences)
        return f"{what}: {n} difference{'s' * (n > 1)} from the baseline ({keys}; {held}; see the report)"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["followed"] = self.followed
        return data


def describe_check(check: CheckSpec) -> str:
    """``absolute <= 0.0001, stepwise``: a check without its metric, its scope in its check kind's words."""
    hardware = f" (on {check.hardware})" if check.hardware else ""
    scope = scope_kind(check.scope).describe(check)
    return f"{check.method} {check.operator} {check.shown_threshold}{hardware}, {scope}"


def _same(a: CheckSpec, b: CheckSpec) -> bool:
    return (a.metric, a.method, a.operator, a.scope, a.percentile) == (b.metric, b.method, b.operator, b.scope,
                                                                        b.percentile) \
        and not a.placeholder and math.isclose(a.threshold, b.threshold, rel_tol=1e-9, abs_tol=0.0)


def check_differences(spec: FrameworkSpec, checks: Sequence[CheckSpec]) -> list[SpecDifference]:
    """Per metric: a spec check no gate of the baseline matches, and a baseline gate on a metric the spec omits."""
    gates = [c for c in checks if c.severity in GATING]
    found: list[SpecDifference] = []
    for wanted in (as_check(c, spec.where) for c in spec.checks):
        if any(_same(wanted, c) for c in gates):
            continue
        held = [describe_check(c) for c in gates if c.metric == wanted.metric]
        said = "; ".join(held) if held else "none"
        line = f"the framework's spec checks {wanted.metric}: {describe_check(wanted)}; " + (
            f"this baseline checks it: {said}" if held else "this baseline does not check it")
        found.append(SpecDifference("check", wanted.metric, describe_check(wanted), said, line))
    named = {c.metric for c in spec.checks}
    for metric in dict.fromkeys(c.metric for c in gates if c.metric not in named):
        held = "; ".join(describe_check(c) for c in gates if c.metric == metric)
        found.append(SpecDifference("check", metric, "none", held,
                                    f"this baseline checks {metric}: {held}; the framework's spec does not check it"))
    return found


def environment_differences(spec: FrameworkSpec, env: Mapping[str, str]) -> list[SpecDifference]:
    """Each setting the spec runs with (its env entries that are not paths on its own cluster) that the case's launch
    does not set to the same value."""
    found = []
    for name, value in spec.settings.items():
        have = env.get(name)
        if have == value:
            continue
        said = "does not set it" if have is None else f"sets {name}={have}"
        found.append(SpecDifference("env", name, f"{name}={value}", have if have is not None else "unset",
                                    f"the framework's spec runs with {name}={value}; this case's launch {said}"))
    return found


def compare_spec(spec: FrameworkSpec, checks: Sequence[CheckSpec], env: Mapping[str, str], timeout_s: float | None,
                 golden: str | None = None) -> tuple[SpecDifference, ...]:
    """Every difference between ``spec`` and a baseline's ``checks``, its case's launch ``env`` and ``timeout_s``,
    and its golden tracker path (``golden``; None for a golden table)."""
    found = check_differences(spec, checks) + environment_differences(spec, env)
    if spec.timeout_s is not None and (timeout_s is None or not math.isclose(spec.timeout_s, timeout_s)):
        have = f"{timeout_s:g} s" if timeout_s is not None else "none"
        found.append(SpecDifference("timeout", "launch.timeout_s", f"{spec.timeout_s:g} s", have,
                                    f"the framework's spec gives the run {spec.timeout_s:g} s; this case's "
                                    f"launch.timeout_s is {have}"))
    if spec.base_metric and golden is not None and not golden.replace("\\", "/").endswith("/" + spec.base_metric):
        found.append(SpecDifference("golden", "base_metric", spec.base_metric, golden,
                                    f"the framework's spec compares against {spec.base_metric} in its baseline "
                                    f"store; this baseline's golden tracker is {golden}"))
    return tuple(found)


def spec_comparison(reading: SpecReading, baseline: Baseline | None, own: Case) -> SpecComparison:
    """The verdict's record: ``reading`` against the baseline's own checks and ``own`` case's launch (before the
    spec was followed)."""
    ref = reading.ref
    common = dict(path=ref.path, case=ref.case, mode=ref.mode, commit=reading.commit, changed_in=reading.changed_in)
    if reading.spec is None:
        return SpecComparison(**common, state=UNREAD if reading.error else ABSENT,
                              note=reading.error or _absent_note(reading))
    if baseline is None:
        return SpecComparison(**common, state=UNREAD, note="not compared: the baseline could not be loaded")
    golden = str(baseline.golden_tracker) if baseline.golden_tracker is not None else None
    return SpecComparison(**common, state=COMPARED, differences=compare_spec(
        reading.spec, baseline.checks, own.launch.env, own.launch.timeout_s, golden))


def _absent_note(reading: SpecReading) -> str:
    held = "the baseline's checks gate this run" if reading.ref.follows else "nothing to compare"
    return f"{reading.absent}; {held}"
