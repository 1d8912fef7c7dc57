"""Shadow gates: judged exactly like gates and recorded, their FAIL never deciding the run.

A check is a shadow gate when its baseline says ``severity: shadow`` or its case says ``shadow: true``
(:func:`autotest.inputs.baseline_model.in_shadow`). Its result keeps its own status (PASS, FAIL, ERROR) and severity
``shadow`` in results.json and the history; :attr:`CheckResult.is_gate` is False for it, so the verdict, triage and
fail-fast never read it. What it would have done is said in one line wherever the verdict is shown.

A recalibrated candidate can enter in shadow beside the baseline (``<case>.shadow.yaml``): each of its checks is
judged against its own golden values as a shadow gate, ``candidate@<file hash>:<check id>``, next to the blocking
ones, until
``baseline promote --from-shadow`` makes it the baseline.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from autotest.inputs.baseline_model import SHADOW, Baseline, for_hardware, in_shadow
from autotest.judge.model import ERROR, FAIL, CheckResult

__all__ = ["SHADOW", "ShadowCandidate", "candidate_label", "load_shadow_candidate", "shadow_alarms",
           "shadow_candidate_path", "shadow_line"]


def shadow_alarms(results: Iterable[CheckResult]) -> list[CheckResult]:
    """The shadow gates that would have failed (FAIL) or could not decide (ERROR)."""
    return [r for r in results if r.severity == SHADOW and r.status in (FAIL, ERROR)]


def shadow_line(result: CheckResult) -> str:
    """``shadow: rewards[final] would have failed (…)``: the one line every renderer shows."""
    what = "would have failed" if result.status == FAIL else "could not decide"
    return f"shadow: {result.check_id} {what} ({result.message})"


#: a recalibrated candidate judged in shadow beside the baseline: ``<case>.shadow.yaml`` next to ``<case>.yaml``
CANDIDATE_SUFFIX = ".shadow.yaml"


@dataclass(frozen=True)
class ShadowCandidate:
    """A candidate in shadow: its checks (as shadow gates), or why it could not be read, and its label."""

    #: ``candidate@<first 8 hex of the file's sha256>``: a new candidate's nights are counted afresh
    label: str
    baseline: Baseline | None = None
    problem: str = ""

    def check_id(self, check_id: str) -> str:
        """``candidate@1a2b3c4d:response/rewards/mean[stepwise]``: its id in results.json and the history."""
        return f"{self.label}:{check_id}"


def shadow_candidate_path(baseline_path: Path) -> Path:
    """Where a baseline's shadow candidate lives (``baseline promote --to-shadow`` puts it there)."""
    baseline_path = Path(baseline_path)
    return baseline_path.with_name(baseline_path.name.rsplit(".", 1)[0] + CANDIDATE_SUFFIX)


def candidate_label(path: Path) -> str:
    return f"candidate@{hashlib.sha256(Path(path).read_bytes()).hexdigest()[:8]}"


def load_shadow_candidate(baseline_path: Path, gpu: Mapping[str, Any] | None = None) -> ShadowCandidate | None:
    """The shadow candidate beside ``baseline_path`` with this node's per-hardware thresholds, its checks shadow
    gates; None when there is none. One that cannot be read carries the one line saying why (its own shadow ERROR,
    never the run's)."""
    path = shadow_candidate_path(baseline_path)
    if not path.is_file():
        return None
    label = candidate_label(path)
    try:
        return ShadowCandidate(label, in_shadow(for_hardware(load_baseline(path), gpu)))
    except UsageError as exc:
        return ShadowCandidate(label, problem=str(exc))
