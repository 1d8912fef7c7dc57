"""Step alignment: are the current run's steps the baseline's steps, or counted differently?

Series are aligned by their real step number. When a trainer's logging changes how it numbers steps — every
row one step late, a step counter in micro-steps (2, 4, … 90 for 45 steps), a log every second step, eval at
other steps — aligning by number turns one logging change into a cascade of per-check ERRORs ("lacks steps 1",
"final points at different steps", "reached step 46") that read like a crashed run. This module finds the one
cause before judging:

- a constant **offset** of up to ``MAX_OFFSET`` steps (every training step d higher or lower);
- a **scale** (every step number k times the baseline's, the same count of rows);
- a **stride** (only every k-th of the baseline's steps logged);
- **eval points** at other steps than the baseline's.

For an offset or a scale the current trace is mapped back onto the baseline's numbering, with the evidence of
whether the metrics then match (mean absolute error at the common steps, before and after), so the checks judge
the training rather than the numbering. The finding itself is an ERROR (``steps[alignment]``): the run's logging
or step accounting changed, and a gate must not silently re-number it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from autotest.judge.model import ERROR, CheckResult
from autotest.judge.trace import EVAL_PREFIX, Trace

MAX_OFFSET = 5
MAX_SCALE = 8
RULE = "step-accounting"
SUGGESTION = ("logging / step accounting changed (not the training): check how the trainer numbers and logs its "
              "steps (an off-by-one in the logged step, a counter in micro-steps, a new logging interval)")


@dataclass(frozen=True)
class Alignment:
    """What the steps say: the finding (None: aligned) and the trace to judge."""

    finding: CheckResult | None
    trace: Trace
    #: the mapping from current step to baseline step that was applied (None: none applied)
    kind: str | None = None


def align_steps(golden: Trace, current: Trace, metrics: Sequence[str]) -> Alignment:
    """The current trace against the golden's step numbering (``metrics``: the checked ones, for the evidence)."""
    golden_steps, steps = list(golden.train_steps), list(current.train_steps)
    if not golden_steps or not steps or set(steps) == set(golden_steps):
        return _eval_points(golden, current)
    train = [m for m in metrics if not m.startswith(EVAL_PREFIX) and golden.get(m) and current.get(m)]
    for offset in [d for k in range(1, MAX_OFFSET + 1) for d in (k, -k)]:
        if sorted(s - offset for s in steps) == golden_steps:
            return _remapped(golden, current, train, lambda s, d=offset: s - d, "offset",
                             f"every training step is {abs(offset)} {'higher' if offset > 0 else 'lower'} than the "
                             f"baseline's (current {steps[0]}..{steps[-1]}, baseline {golden_steps[0]}.."
                             f"{golden_steps[-1]})", {"offset": offset})
    for scale in range(2, MAX_SCALE + 1):
        if all(s % scale == 0 for s in steps) and sorted(s // scale for s in steps) == golden_steps:
            return _remapped(golden, current, train, lambda s, k=scale: s // k, "scale",
                             f"every training step number is {scale} x the baseline's ({len(steps)} steps numbered "
                             f"{steps[0]}, {steps[1] if len(steps) > 1 else ''}.. {steps[-1]}; a counter in "
                             "micro-steps or gradient-accumulation steps?)", {"scale": scale})
    stride = _stride(steps, golden_steps)
    if stride is not None:
        finding = CheckResult(
            "steps[alignment]", ERROR, kind="structural",
            message=(f"the run logs every {stride}th of the baseline's steps ({len(steps)} of {len(golden_steps)}: "
                     f"{steps[0]}, {steps[1]}, .., {steps[-1]}): its logging interval changed; steps the baseline "
                     "has and the run does not are not judged"), parameters={"stride": stride})
        return Alignment(finding, current, None)
    return _eval_points(golden, current)


def _stride(steps: list[int], golden_steps: list[int]) -> int | None:
    if len(steps) < 2 or not set(steps) <= set(golden_steps):
        return None
    gaps = {b - a for a, b in zip(steps, steps[1:])}
    if len(gaps) == 1 and (stride := gaps.pop()) > 1 and len(steps) >= len(golden_steps) // stride - 1:
        return stride
    return None


def _remapped(golden: Trace, current: Trace, metrics: Sequence[str], to_golden: Callable[[int], int], kind: str,
              what: str, parameters: Mapping[str, int]) -> Alignment:
    mapped = _map_trace(current, to_golden, set(golden.eval_steps))
    before = _mean_error(golden, current, metrics)
    after = _mean_error(golden, mapped, metrics)
    if after is not None and (before is None or after < before):
        evidence = (f"mapped back, the training metrics match better (mean |error| {_fmt(after)} against "
                    f"{_fmt(before)} as logged)")
    elif after is not None:
        # one or two steps of a smooth curve move it less than seed noise does: not evidence against the shift
        evidence = (f"mapped back, the training metrics match no better (mean |error| {_fmt(after)} against "
                    f"{_fmt(before)} as logged: seed noise hides a shift this small; the gates below decide)")
    else:
        evidence = "no checked training metric to compare"
    finding = CheckResult("steps[alignment]", ERROR, f"{what}; {evidence}: a logging or step-accounting change; "
                          "the checks below judge the run on the baseline's step numbers", kind="structural",
                          parameters={**parameters, "mean_abs_error_as_logged": before,
                                      "mean_abs_error_mapped": after})
    return Alignment(finding, mapped, kind)


def _map_trace(trace: Trace, to_golden: Callable[[int], int], golden_evals: set[int]) -> Trace:
    """The trace renumbered at its training steps; eval points logged with a training row move with it only when
    that lands them on the baseline's eval steps (an eval-only row, e.g. step 0, keeps its step)."""
    train = set(trace.train_steps)

    def renumber(step: int) -> int:
        return to_golden(step) if step in train else step

    evals_move = bool(trace.eval_steps) and {renumber(s) for s in trace.eval_steps} <= golden_evals
    series = {}
    for metric, values in trace.series.items():
        moves = evals_move or not metric.startswith(EVAL_PREFIX)
        series[metric] = MappingProxyType({renumber(s) if moves else s: v for s, v in values.items()})
    eval_steps = tuple(renumber(s) for s in trace.eval_steps) if evals_move else trace.eval_steps
    return Trace(source=trace.source, series=MappingProxyType(series),
                 train_steps=tuple(to_golden(s) for s in trace.train_steps), eval_steps=eval_steps,
                 warnings=trace.warnings, format=trace.format, step_lines=trace.step_lines,
                 non_numeric=trace.non_numeric, logged_metrics=trace.logged_metrics)


def _mean_error(golden: Trace, current: Trace, metrics: Sequence[str]) -> float | None:
    """Mean over metrics of the mean |current - golden| / max(|golden|, tiny) at their common steps."""
    per_metric = []
    for metric in metrics:
        want, have = golden.get(metric) or {}, current.get(metric) or {}
        common = [s for s in want if s in have and math.isfinite(want[s]) and math.isfinite(have[s])]
        if common:
            scale = max(max(abs(want[s]) for s in common), 1e-12)
            per_metric.append(math.fsum(abs(have[s] - want[s]) for s in common) / len(common) / scale)
    return math.fsum(per_metric) / len(per_metric) if per_metric else None


def _fmt(value: float | None) -> str:
    return "n/a (no common step)" if value is None else f"{value:.2%} of golden"


def _eval_points(golden: Trace, current: Trace) -> Alignment:
    """Eval at other steps than the baseline's: one finding, not one ERROR per point. A run that stopped early
    (its evals a prefix of the baseline's) or ran longer (evals past the baseline's last) is not one."""
    want = list(golden.eval_steps)
    have = list(current.eval_steps)
    elsewhere = [s for s in have if s not in want and want and s <= want[-1]]
    if want and elsewhere and set(want) - set(have):
        finding = CheckResult("steps[alignment]", ERROR, kind="structural", message=(
            f"eval points at other steps: the run evaluated at {_list(have)}, the baseline at {_list(want)}; "
            "the eval interval or the step it is logged at changed"), parameters={"eval_steps": have,
                                                                                   "baseline_eval_steps": want})
        return Alignment(finding, current, None)
    return Alignment(None, current, None)


def _list(steps: Sequence[int]) -> str:
    shown = ", ".join(str(s) for s in steps[:6])
    return shown + (f", .. {steps[-1]}" if len(steps) > 6 else "")
