"""Which design reaches a detection target: golden K, paired K, and the window gate that sees the change.

A case's ``detect: {metric: effect}`` says what it must catch. Where the change acts matters: a gate pooled over
the whole run sees a change confined to its late third at a third of its size, so only a gate whose steps lie
inside the change's steps is counted for it (its MDE is stated for a shift held over its own steps). For each
target and each span a change could act over (each window of the metric's gates, and the whole run) this module
finds the cheapest design whose gate catches ``effect`` with 80% power:

- **golden K**: K runs of the change, judged on their mean against the golden (``replicates: K``); K runs a
  verdict, K from :data:`autotest.judge.power.REPLICATES` (the MDE is tabulated there);
- **paired K**: K seeds per side, base and head on the same seeds, judged on their differences by the
  baseline's ``paired:`` section (measured on A/A pairs, :mod:`autotest.judge.paired`); 2K runs a verdict.

Then the design for a change wherever it acts: one verdict judges every gate at the same K, so it is the largest K
any span needs, per kind, and the cheaper of the two in runs (the kind that reaches more spans first). A span no
design reaches up to the largest K is named, with its closest gate's MDE there. Pure logic: baselines in, frozen
advice out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from autotest.inputs.baseline_model import Baseline, PairedSpec
from autotest.judge.paired import paired_mde
from autotest.judge.power import REPLICATES, GatePower, baseline_power, change_spans, inside

#: the most seeds per side a paired design is searched over (as the golden K's largest tabulated value)
MAX_PAIRED_SEEDS = max(REPLICATES)


@dataclass(frozen=True)
class Design:
    """One way to reach a target: the gate that catches it, the replicates or seeds per side, the runs it costs."""

    #: ``golden`` (K replicates against the golden) or ``paired`` (K seeds per side, base and head)
    kind: str
    gate: str
    #: K: replicates (golden) or seeds per side (paired)
    k: int
    #: the gate's MDE at that K, in the metric's units
    mde: float

    @property
    def runs(self) -> int:
        """Training runs one verdict costs: K for golden, base and head on K seeds for paired."""
        return self.k * (2 if self.kind == "paired" else 1)

    def describe(self) -> str:
        what = f"K={self.k}" if self.kind == "golden" else f"{self.k} seed{'s' * (self.k > 1)} per side"
        return f"{self.kind} {what} ({self.runs} run{'s' * (self.runs > 1)})"


@dataclass(frozen=True)
class SpanAdvice:
    """The cheapest golden and paired designs for a change of the target's size acting over ``steps``."""

    steps: tuple[int, int]
    golden: Design | None
    paired: Design | None
    #: when no golden K reaches it: the gate inside the span with the lowest MDE at the largest K (how far off)
    closest: Design | None = None

    @property
    def cheapest(self) -> Design | None:
        found = [d for d in (self.golden, self.paired) if d is not None]
        return min(found, key=lambda d: (d.runs, d.kind != "golden")) if found else None


@dataclass(frozen=True)
class TargetAdvice:
    """A ``detect:`` target, the design per span it could act over, and the design for a change anywhere."""

    metric: str
    effect: float
    spans: tuple[SpanAdvice, ...]

    def overall(self, kind: str) -> int | None:
        """The K of ``kind`` that reaches the target over every span (the largest any span needs); None: some span
        is out of that kind's reach."""
        needed = [getattr(s, kind) for s in self.spans]
        if not needed or any(d is None for d in needed):
            return None
        return max(d.k for d in needed)

    @property
    def unreached(self) -> tuple[SpanAdvice, ...]:
        """The spans no design up to the largest K reaches."""
        return tuple(s for s in self.spans if s.cheapest is None)

    @property
    def advised(self) -> Design | None:
        """The cheapest design that reaches the target wherever the change acts (its gate: the span needing most),
        over the spans some design reaches (:attr:`unreached` names the others); None when none is reached."""
        options = []
        for kind in ("golden", "paired"):
            reached = [d for d in (getattr(s, kind) for s in self.spans) if d is not None]
            if reached:
                hardest = max(reached, key=lambda d: (d.k, d.mde))
                options.append((-len(reached), Design(kind, hardest.gate, hardest.k, hardest.mde)))
        # the kind reaching the most spans, then the fewest runs, golden on a tie (no base run to make)
        best = min(options, key=lambda o: (o[0], o[1].runs, o[1].kind != "golden")) if options else None
        return best[1] if best else None


def _golden(powers: Sequence[GatePower], span: tuple[int, int], effect: float) -> tuple[Design | None, Design | None]:
    """The fewest replicates at which a gate inside ``span`` catches ``effect`` (the lowest MDE among ties); else
    (None, the gate closest to it at the largest K)."""
    within = [p for p in powers if p.steps is not None and inside(p.steps, span)]
    for k in REPLICATES:
        reach = [p for p in within if p.mde(k) <= effect]
        if reach:
            best = min(reach, key=lambda p: p.mde(k))
            return Design("golden", best.check_id, k, best.mde(k)), None
    k = max(REPLICATES)
    closest = min(within, key=lambda p: p.mde(k), default=None)
    return None, (Design("golden", closest.check_id, k, closest.mde(k)) if closest else None)


def _paired(spec: PairedSpec | None, metric: str, span: tuple[int, int], effect: float) -> Design | None:
    """The fewest seeds per side at which a paired window inside ``span`` catches ``effect``."""
    if spec is None:
        return None
    windows = [w for w in spec.windows if w.metric == metric and inside((w.start, w.end), span)]
    for k in range(1, MAX_PAIRED_SEEDS + 1):
        reach = [w for w in windows if paired_mde(spec, w, k) <= effect]
        if reach:
            best = min(reach, key=lambda w: paired_mde(spec, w, k))
            return Design("paired", best.gate_id, k, paired_mde(spec, best, k))
    return None


def spans_of(powers: Sequence[GatePower], spec: PairedSpec | None, metric: str) -> tuple[tuple[int, int], ...]:
    """The spans a change on ``metric`` is advised for: each window of its golden and paired gates (more than one
    step) and the whole run they cover, in order of first step, widest last."""
    steps = [p.steps for p in powers if p.metric == metric and p.steps is not None]
    if spec is not None:
        steps += [(w.start, w.end) for w in spec.windows if w.metric == metric]
    return tuple(change_spans(steps))


def advise(baseline: Baseline, targets: Mapping[str, float]) -> list[TargetAdvice]:
    """The design per ``detect:`` target (metric -> effect in its units) from the baseline's gates and its paired
    section."""
    powers = baseline_power(baseline)
    advice = []
    for metric, effect in targets.items():
        mine = [p for p in powers if p.metric == metric]
        spans = []
        for span in spans_of(mine, baseline.paired, metric):
            golden, closest = _golden(mine, span, effect)
            spans.append(SpanAdvice(span, golden, _paired(baseline.paired, metric, span, effect), closest))
        advice.append(TargetAdvice(metric, effect, tuple(spans)))
    return advice
