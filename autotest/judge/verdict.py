"""Compare one run's metric log with a golden baseline: read, check, triage, decide."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from autotest.errors import UsageError
from autotest.inputs.baseline import Baseline, load_baseline
from autotest.judge.checks import run_checks
from autotest.judge.model import Verdict, decide_status
from autotest.judge.readers import EVAL_PREFIX, read_trace
from autotest.judge.trace import Trace
from autotest.judge.triage import triage


@dataclass(frozen=True)
class Comparison:
    """A verdict together with the traces it was made from (plots draw the full series)."""

    verdict: Verdict
    baseline: Baseline
    golden: Trace
    current: Trace


def golden_trace(baseline: Baseline) -> Trace:
    """The golden values as a Trace: from the baseline's table, or read from its reference tracker."""
    if baseline.golden_table is not None:
        table = baseline.golden_table
        train = sorted({s for m, v in table.items() if not m.startswith(EVAL_PREFIX) for s in v})
        evals = sorted({s for m, v in table.items() if m.startswith(EVAL_PREFIX) for s in v})
        return Trace(source=f"{baseline.path} (golden table)", series=MappingProxyType(dict(table)),
                     train_steps=tuple(train), eval_steps=tuple(evals), format="table")
    assert baseline.golden_tracker is not None
    if not baseline.golden_tracker.exists():
        raise UsageError(f"{baseline.path}: golden.tracker: {baseline.golden_tracker} does not exist; "
                         "check the share root (e.g. CI_SHARE_BASELINE)")
    return read_trace(baseline.golden_tracker, baseline.golden_format, dict(baseline.metric_aliases),
                      metrics=checked_metrics(baseline))


def checked_metrics(baseline: Baseline) -> set[str]:
    return {c.metric for c in baseline.checks}


def compare(baseline: Baseline, current: Trace, *, case: str | None = None, wall_time_s: float | None = None,
            context: dict[str, Any] | None = None, golden: Trace | None = None) -> Comparison:
    if golden is None:
        golden = golden_trace(baseline)
    if baseline.metric_aliases:
        current = current.with_aliases(dict(baseline.metric_aliases))
    results = tuple(run_checks(baseline, golden, current, baseline.golden_table is not None, wall_time_s))
    verdict = Verdict(
        status=decide_status(results),
        case=case or baseline.name,
        results=results,
        triage=triage(results, current),
        current_source=current.source,
        baseline_source=golden.source,
        baseline_file=str(baseline.path),
        warnings=tuple(golden.warnings) + tuple(current.warnings),
        context=dict(context or {}),
    )
    return Comparison(verdict, baseline, golden, current)


def compare_paths(baseline_path: str | Path, current_path: str | Path, *, fmt: str = "auto",
                  case: str | None = None, wall_time_s: float | None = None,
                  context: dict[str, Any] | None = None) -> Comparison:
    """Load the baseline and the current run's tracker (a file or a work dir) and compare them."""
    baseline = load_baseline(baseline_path)
    current = read_trace(current_path, fmt, dict(baseline.metric_aliases), metrics=checked_metrics(baseline))
    return compare(baseline, current, case=case, wall_time_s=wall_time_s, context=context)
