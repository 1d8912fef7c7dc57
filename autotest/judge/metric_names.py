"""Does the log name the baseline's metrics? When not, say which are missing and what the log has instead.

A log whose metrics are named otherwise (every TensorBoard tag prefixed ``train/``, a Hugging Face
callback's ``reward`` for ``response/rewards/mean``) or that is another run's or case's log would
otherwise surface as a cascade of per-check errors, a "run is incomplete" or a step-count FAIL.
One ERROR names the checked metrics the log lacks, the log's metrics the baseline does not know,
and the fix: ``metric_aliases`` in the baseline (``canonical name: name as logged``). When the log has
none of the checked metrics, nothing else is judged against it (its steps are not this baseline's).
"""

from __future__ import annotations

from autotest.inputs.baseline import Baseline
from autotest.inputs.baseline_model import SHADOW
from autotest.judge.model import ERROR, CheckResult
from autotest.judge.trace import Trace

CHECK_ID = "metrics[names]"
#: names listed in the message before "and N more"
_LISTED = 6


def _listed(names: list[str]) -> str:
    more = f" and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
    return ", ".join(names[:_LISTED]) + more


def _closest(metric: str, candidates: list[str]) -> str | None:
    """A logged name that looks like ``metric`` (same last component), for the alias example."""
    tail = metric.rsplit("/", 1)[-1]
    return next((c for c in candidates if c.rsplit("/", 1)[-1] == tail or c.endswith(metric)), None)


def _reached(metric: str, current: Trace, golden: Trace | None) -> bool:
    """Whether the run got far enough to have logged ``metric`` (a crashed run may stop before its first point)."""
    series = golden.get(metric) if golden is not None else None
    if not series:
        return True
    last = max(current.train_steps + current.eval_steps, default=None)
    return last is not None and last >= min(series)


def name_results(baseline: Baseline, current: Trace, golden: Trace | None = None) -> list[CheckResult]:
    """One ERROR when checked metrics are absent from the log (see the module doc); [] when all are there.

    A metric whose first golden point lies beyond the run's last step is not counted: the run stopped
    before it (that is the completion check's to say), not a renamed metric.
    """
    checked = sorted({c.metric for c in baseline.checks})
    # a metric logged as a list, dict or bool is there, as the wrong kind: its checks say so
    missing = [m for m in checked if current.get(m) is None and m not in current.non_numeric
               and _reached(m, current, golden)]
    if not missing:
        return []
    aliases = dict(baseline.metric_aliases)
    known = set(checked) | set(aliases) | set(aliases.values())
    logged = sorted(set(current.logged_metrics or current.series) - known)
    example = next(((m, c) for m in missing if (c := _closest(m, logged)) is not None),
                   (missing[0], logged[0]) if logged else None)
    where = f"the log ({current.source})"
    message = f"{len(missing)} of {len(checked)} checked metrics are not in {where}: {_listed(missing)}"
    if logged:
        message += f"; it logs {len(logged)} metric(s) the baseline does not name: {_listed(logged)}"
    if example is not None:
        message += (f"; if these are the same quantities under other names, map them in the baseline's "
                    f"metric_aliases (canonical: as logged), e.g. metric_aliases: {{{example[0]}: {example[1]}}}")
    message += "; if this is another run's or another case's log, pass the right one"
    # metrics only shadow gates check never decide the run, absent or not: the finding is a shadow one then
    shadow_only = all(c.severity == SHADOW for c in baseline.checks if c.metric in missing)
    return [CheckResult(CHECK_ID, ERROR, message, kind="structural", severity=SHADOW if shadow_only else "gate",
                        parameters={"missing": missing, "not_in_baseline": logged[:50]})]


def nothing_in_common(baseline: Baseline, current: Trace) -> bool:
    """Whether the log has none of the baseline's checked metrics (then it is not judged further)."""
    return all(current.get(c.metric) is None and c.metric not in current.non_numeric for c in baseline.checks)
