"""Power by run length: the MDE of every gate at each prefix of a run (the first S steps), from the baseline alone.

A shorter run (a PR tier) judges fewer gates, never the same gates more weakly. The rule, by the steps a gate's
statistic needs (its calibration measured it over exactly those steps, nothing else):

- a gate judged **at every step** (``scope: stepwise``) is judged from its first calibrated step on; its MDE does
  not depend on the run's length (the per-step rule of :mod:`autotest.judge.power`);
- a gate over a **window** (``window: [a, b]``: ``pooled``, ``window``) is judged once the prefix reaches ``b``;
- a gate at **points** (``points: [...]``) judges each point on its own, as a step-wise gate does each step: a
  prefix judges the points it holds, from the first on, at the same threshold and per-point MDE (its threshold
  bounds every point's deviation, so fewer points can only breach less often); the points beyond it are given up;
- every other gate reads **the whole run** (``final``, ``percentile``, ``breaches``, ``slope``): judged only at
  the run's last step (the golden's last step of its metric).

Once judged, a gate's MDE is the full run's (same statistic, same threshold, same noise model). A window cut short
is **not judged** rather than judged with a scaled threshold: the baseline holds the spread of the whole window's
statistic (``measured_max_deviation``, the leave-one-out spread of pooled gates), not of its prefixes, and the
per-step noise varies along the run (tiny-grpo's reward noise rises sevenfold from step 1 to step 20), so no
rescaling by the window's length would be calibrated. A tier that needs early power declares windows that end
inside it (tiny-grpo's ``[1, 15]``), calibrated as any gate is.

Hence, per metric, the best (smallest) MDE among the judged gates is non-increasing in the run's length, and a
``detect:`` target is reached at a prefix when some gate judged there reaches it (:func:`targets_at`).
Pure logic: no process, no file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from autotest.inputs.baseline import Baseline, CheckSpec
from autotest.judge.power import GatePower, describe_mde, gate_power, target_misses
from autotest.scopes import find

NOT_JUDGED = "not judged"
#: the cell of a judged gate with no MDE (a bound: ``method: value``, or an uncalibrated gate)
NO_MDE = "judged (bound)"


@dataclass(frozen=True)
class PrefixGate:
    """One gate of the table: from which step it is judged, and its MDE then (None: a bound, no MDE)."""

    check_id: str
    metric: str
    judged_from: int | None
    power: GatePower | None
    #: a points gate's points (each judged once the prefix holds it); empty for every other gate
    points: tuple[int, ...] = ()

    def points_beyond(self, steps: int) -> tuple[int, ...]:
        """The points a prefix of ``steps`` does not hold (a points gate judged on fewer points than the full run)."""
        return tuple(p for p in self.points if p > steps)

    def judged_at(self, steps: int) -> bool:
        return self.judged_from is not None and steps >= self.judged_from

    def cell(self, steps: int, replicates: int = 1) -> str:
        if not self.judged_at(steps):
            return NOT_JUDGED
        cell = describe_mde(self.power, replicates) if self.power is not None else NO_MDE
        held = [p for p in self.points if p <= steps]
        return f"{cell}, {len(held)} of {len(self.points)} points" if len(held) < len(self.points) else cell


def judged_from(check: CheckSpec, metric_steps: Sequence[int], full: int) -> int | None:
    """The first prefix length (a step number) at which ``check`` can be judged in a run of ``full`` steps, over a
    metric whose golden logs ``metric_steps`` (none: a bound on a metric with no golden, read at the steps the check
    declares); None when nothing it reads falls inside the run."""
    steps = sorted(s for s in metric_steps if s <= full)
    kind = find(check.scope)
    if kind is not None and kind.judged_per_step:
        return steps[0] if steps else min(1, full)
    if check.window is not None:
        first, last = check.window
        inside = [s for s in steps if first <= s <= last] if steps else [min(last, full)] if first <= full else []
        return inside[-1] if inside else None
    if check.points:
        inside = judged_points(check, metric_steps, full)
        return inside[0] if inside else None
    return steps[-1] if steps else full


def judged_points(check: CheckSpec, metric_steps: Sequence[int], full: int) -> tuple[int, ...]:
    """A points gate's points that a run of ``full`` steps judges: those with a golden value inside it (every
    declared point inside it, for a bound on a metric with no golden)."""
    steps = sorted(s for s in metric_steps if s <= full) or range(full + 1)
    return tuple(s for s in steps if s in check.points)


def full_run(baseline: Baseline) -> int:
    """The full run's last step: the expected steps, else the golden's last step."""
    if baseline.steps.expected:
        return baseline.steps.expected
    return max((max(t) for t in (baseline.golden_table or {}).values() if t), default=0)


def prefix_gates(baseline: Baseline) -> list[PrefixGate]:
    """Every gate of ``baseline`` (severity gate; reference and shadow checks never decide a verdict)."""
    golden, full = baseline.golden_table or {}, full_run(baseline)
    return [PrefixGate(c.check_id, c.metric, judged_from(c, list(golden.get(c.metric, {})), full),
                       gate_power(baseline, c),
                       judged_points(c, list(golden.get(c.metric, {})), full) if c.points else ())
            for c in baseline.checks if c.gating]


def table_steps(gates: Sequence[PrefixGate], full: int) -> list[int]:
    """The rows worth printing: each step where another gate, or another point of a points gate, becomes judgeable,
    and the full run's last step."""
    return sorted({g.judged_from for g in gates if g.judged_from is not None and g.judged_from <= full}
                  | {p for g in gates for p in g.points if p <= full} | {full})


def best_mde(gates: Sequence[PrefixGate], steps: int, replicates: int = 1) -> dict[str, tuple[float, str]]:
    """Per metric: the smallest MDE among the gates judged at ``steps`` and which gate gives it."""
    best: dict[str, tuple[float, str]] = {}
    for g in gates:
        if g.power is None or not g.judged_at(steps) or g.power.per_step or g.power.relative:
            continue  # a growth per step or a share is not in the metric's units: no best across gates
        value = g.power.mde(replicates)
        if g.metric not in best or value < best[g.metric][0]:
            best[g.metric] = (value, g.check_id)
    return best


def targets_at(gates: Sequence[PrefixGate], steps: int, targets: Mapping[str, float],
               replicates: int = 1) -> list[str]:
    """The ``detect:`` targets missed at a prefix of ``steps`` (one line each; empty: every target is reached)."""
    judged = [g.power for g in gates if g.power is not None and g.judged_at(steps)]
    return target_misses(judged, targets, replicates)


def prefix_rows(gates: Sequence[PrefixGate], steps: Sequence[int], full: int, replicates: int = 1,
                targets: Mapping[str, float] | None = None) -> list[str]:
    """A markdown table: one row per prefix (steps run), one column per gate, the MDE or ``not judged``; with
    ``targets``, a last column saying whether the case's ``detect:`` targets are reached there."""
    head = ["steps", *(f"`{g.check_id}`" for g in gates), *(["detect:"] if targets else [])]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in steps:
        cells = [f"{s} of {full}", *(g.cell(s, replicates) for g in gates)]
        if targets:
            missed = targets_at(gates, s, targets, replicates)
            cells.append("reached" if not missed else f"missed {len(missed)} of {len(targets)}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def given_up(gates: Sequence[PrefixGate], steps: int, full: int, replicates: int = 1) -> list[str]:
    """What a run of ``steps`` of ``full`` gives up against the full run: the gates it does not judge, and each
    metric's best MDE where it is weaker (``response/rewards/mean ±0.05 instead of ±0.021``)."""
    if steps >= full:
        return []
    lines = [f"{g.check_id} not judged" for g in gates if g.judged_at(full) and not g.judged_at(steps)]
    lines += [f"{g.check_id} at step{'s' if len(beyond) > 1 else ''} {'/'.join(map(str, beyond))} not judged"
              for g in gates if g.judged_at(steps) and (beyond := g.points_beyond(steps))]
    short, whole = best_mde(gates, steps, replicates), best_mde(gates, full, replicates)
    for metric, (value, _) in whole.items():
        if metric not in short:
            judged = any(g.metric == metric and g.judged_at(steps) for g in gates)
            what = "only its bounds judged" if judged else "no gate judged"
            lines.append(f"{metric}: {what} (the full run's best ±{value:.2g})")
        elif not math.isclose(short[metric][0], value):
            lines.append(f"{metric} ±{short[metric][0]:.2g} instead of ±{value:.2g}")
    return lines
