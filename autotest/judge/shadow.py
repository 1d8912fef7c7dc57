"""Shadow gates: judged exactly like gates and recorded, their FAIL never deciding the run.

A check is a shadow gate when its baseline says ``severity: shadow`` or its case says ``shadow: true``
(:func:`autotest.inputs.baseline_model.in_shadow`). Its result keeps its own status (PASS, FAIL, ERROR) and severity
``shadow`` in results.json and the history; :attr:`CheckResult.is_gate` is False for it, so the verdict, triage and
fail-fast never read it. What it would have done is said in one line wherever the verdict is shown.
"""

from __future__ import annotations

from collections.abc import Iterable

from autotest.inputs.baseline_model import SHADOW
from autotest.judge.model import ERROR, FAIL, CheckResult

__all__ = ["SHADOW", "shadow_alarms", "shadow_line"]


def shadow_alarms(results: Iterable[CheckResult]) -> list[CheckResult]:
    """The shadow gates that would have failed (FAIL) or could not decide (ERROR)."""
    return [r for r in results if r.severity == SHADOW and r.status in (FAIL, ERROR)]


def shadow_line(result: CheckResult) -> str:
    """``shadow: rewards[final] would have failed (…)``: the one line every renderer shows."""
    what = "would have failed" if result.status == FAIL else "could not decide"
    return f"shadow: {result.check_id} {what} ({result.message})"
