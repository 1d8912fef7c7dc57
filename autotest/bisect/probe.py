"""One bisect probe: a framework commit judged by the case's accuracy gates, with a confidence.

A single run near a threshold says little: its statistics sit in the grey zone where seed noise alone could
put them on either side. Such a probe gets more replicates (judged on their mean, pooled thresholds scaled)
before it counts, so a noise-sized wobble cannot send the search the wrong way. Step time and wall time are
not part of a probe's answer: probes run side by side and slow each other down.

- ``good`` / ``bad``: every accuracy gate passed / one failed; confidence ``high`` when no gate's
  observed / threshold lies in the grey zone, ``medium`` when more replicates settled it, ``low`` when they
  did not (the answer is then the replicates' verdict, marked);
- ``skipped``: the commit could not be built or run (an ERROR verdict: crash, missing metric, bad checkout).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotest.bisect.search import BAD, GOOD, SKIPPED
from autotest.errors import UsageError
from autotest.inputs.case import Case
from autotest.judge.model import ERROR, FAIL, CheckResult, Verdict
from autotest.pipeline import CaseRun, RunOptions, run_case

#: observed / threshold in [GREY_LOW, GREY_HIGH] is too close to call on one run
GREY_LOW, GREY_HIGH = 0.75, 1.33
#: replicates for an ambiguous probe (one more look at the mean of this many fresh seeds)
CONFIRM_REPLICATES = 3
_TIMING_METHODS = ("slowdown",)


@dataclass(frozen=True)
class ProbeResult:
    commit: str
    answer: str
    confidence: str
    runs: int
    wall_s: float
    #: gate check id -> (status, observed, threshold) of the deciding verdict
    gates: dict[str, tuple[str, float | None, float | None]] = field(default_factory=dict)
    reason: str = ""
    results_dir: str = ""
    #: Ray node ids of its attempts, oldest first (two: its node was lost and it re-ran elsewhere)
    nodes: tuple[str, ...] = ()
    #: wall x devices of every run behind the answer (:mod:`autotest.report.cost`)
    device_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"commit": self.commit, "answer": self.answer, "confidence": self.confidence, "runs": self.runs,
                "wall_s": round(self.wall_s, 1), "device_seconds": round(self.device_seconds, 1),
                "reason": self.reason, "results_dir": self.results_dir,
                "gates": {k: {"status": s, "observed": o, "threshold": t} for k, (s, o, t) in self.gates.items()},
                **({"nodes": list(self.nodes)} if self.nodes else {})}


def accuracy_gates(verdict: Verdict) -> list[CheckResult]:
    """The gates a probe answers with: metric gates that are not timing."""
    return [r for r in verdict.results if r.is_gate and r.kind == "metric" and r.method not in _TIMING_METHODS]


def answer_of(verdict: Verdict | None) -> tuple[str, str]:
    """(good | bad | skipped, why) from a verdict."""
    if verdict is None:
        return SKIPPED, "no verdict"
    gates = accuracy_gates(verdict)
    failed = [r for r in gates if r.status == FAIL]
    if failed:
        return BAD, "; ".join(f"{r.check_id} FAIL" for r in failed[:3])
    broken = [r for r in verdict.results if r.is_gate and r.status == ERROR and r.method not in _TIMING_METHODS]
    if broken:
        return SKIPPED, broken[0].message
    return GOOD, "every accuracy gate passed"


def ambiguous(verdict: Verdict) -> list[str]:
    """The gates whose observed / threshold lies in the grey zone; none when a gate fails clearly beyond it
    (a run that breaches one gate far past its threshold is bad whatever its other gates say)."""
    close = []
    for r in accuracy_gates(verdict):
        ratio = None if r.observed is None or not r.threshold else abs(r.observed) / abs(r.threshold)
        if r.status == FAIL and (ratio is None or not GREY_LOW <= ratio <= GREY_HIGH):
            return []
        if ratio is not None and GREY_LOW <= ratio <= GREY_HIGH:
            close.append(f"{r.check_id} at {ratio:.2f} x its threshold")
    return close


def probe(case: Case, commit: str, repo: str, folder: Path, options: RunOptions,
          run: Callable[[Case, RunOptions], CaseRun] = run_case) -> ProbeResult:
    """Judge ``commit``: one run, and ``CONFIRM_REPLICATES`` more seeds when it lands in the grey zone."""
    # a probe's results.json says it is one (context.kind "bisect"): the history never trusts it
    base = options.changed(
        launch={"framework_repo": repo, "framework_ref": commit, "results_dir": None, "results_root": folder,
                "confirm": None},
        judge={"replicates": 1, "purpose": "bisect"}, publish={"after_results": None, "step_summary": False})
    try:
        first = run(case, base)
    except UsageError as exc:  # the commit cannot be checked out or its case cannot start
        return ProbeResult(commit, SKIPPED, "high", 0, 0.0, reason=str(exc))
    answer, why = answer_of(first.verdict)
    runs, wall = 1, _wall(first)
    spent = _device_seconds(first)
    if answer == SKIPPED or first.verdict is None:
        return ProbeResult(commit, SKIPPED, "high", runs, wall, reason=why, results_dir=str(first.results_dir or ""),
                           device_seconds=spent)
    close = ambiguous(first.verdict)
    if not close:
        return ProbeResult(commit, answer, "high", runs, wall, _gates(first.verdict), why, str(first.results_dir),
                           device_seconds=spent)
    seed = (options.launch.seed if options.launch.seed is not None else case.seed.default) + 1000
    confirm = run(case, base.changed(launch={"seed": seed}, judge={"replicates": CONFIRM_REPLICATES}))
    runs += CONFIRM_REPLICATES
    wall += _wall(confirm)
    spent += _device_seconds(confirm)
    settled, why2 = answer_of(confirm.verdict)
    if settled == SKIPPED or confirm.verdict is None:
        return ProbeResult(commit, answer, "low", runs, wall, _gates(first.verdict),
                           f"{why}; near a threshold ({', '.join(close)}) and the confirming replicates could not be "
                           f"judged ({why2})", str(first.results_dir), device_seconds=spent)
    still = ambiguous(confirm.verdict)
    return ProbeResult(commit, settled, "low" if still else "medium", runs, wall, _gates(confirm.verdict),
                       f"one run near a threshold ({', '.join(close)}); the mean of {CONFIRM_REPLICATES} more seeds: "
                       f"{why2}" + (f" (still near: {', '.join(still)})" if still else ""),
                       str(confirm.results_dir), device_seconds=spent)


def _gates(verdict: Verdict) -> dict[str, tuple[str, float | None, float | None]]:
    return {r.check_id: (r.status, r.observed, r.threshold) for r in accuracy_gates(verdict)}


def _device_seconds(run: CaseRun) -> float:
    """What the runs behind a verdict cost (its ``context.cost``; a replicate mean's is their sum)."""
    cost = run.verdict.context.get("cost") if run.verdict is not None else None
    return float(cost.get("device_seconds") or 0.0) if isinstance(cost, dict) else 0.0


def _wall(run: CaseRun) -> float:
    """Seconds of run time behind a verdict (every replicate's, for a replicate mean)."""
    if run.verdict is not None and run.verdict.replicates:
        return float(sum(r.wall_s or 0.0 for r in run.verdict.replicates))
    launch = run.verdict.context.get("launch") if run.verdict is not None else None
    if isinstance(launch, dict) and isinstance(launch.get("wall_s"), (int, float)):
        return float(launch["wall_s"])
    return 0.0
