"""The nightly's A/B fallback: when today's environment is not the one the golden was calibrated in, judge the
case A/B against the last trusted commit instead of against the golden (``pytest --ab-if-environment-changed``).

A golden made under another image, driver or library pin fails every case at once when the environment moves,
though no code changed. Then the night's commit and the last commit the history trusts (its latest trusted
passing gate run) run on the same seeds in today's environment; their difference carries none of the drift.
Nothing changes when the environment is the golden's, when the case names no framework (no commit to go back
to), or when the history has no trusted passing run with its framework commit: the golden gate runs as usual.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autotest.history.store import RunRow
from autotest.inputs.baseline_model import Baseline
from autotest.inputs.case import Case
from autotest.judge.model import PASS
from autotest.run.environment_diff import environment_changes

#: how many changes a line lists before "and N more"
SHOWN = 4


@dataclass(frozen=True)
class EnvironmentFallback:
    """An A/B to run instead of the golden gate, and why."""

    base_sha: str
    changes: tuple[str, ...]

    def line(self) -> str:
        shown = ", ".join(self.changes[:SHOWN]) + (f" and {len(self.changes) - SHOWN} more"
                                                  if len(self.changes) > SHOWN else "")
        return (f"the golden's environment is not today's ({shown}): judged A/B against the last trusted commit "
                f"{self.base_sha[:12]} in today's environment instead")


def last_trusted_commit(runs: Sequence[RunRow]) -> str | None:
    """The framework commit of the latest trusted passing gate run (``runs`` oldest first)."""
    return next((r.framework_sha for r in reversed(runs)
                 if r.trusted and r.kind == "gate" and r.status == PASS and r.framework_sha), None)


def environment_fallback(case: Case, baseline: Baseline, today: Mapping[str, Any], runs: Sequence[RunRow]
                         ) -> tuple[EnvironmentFallback | None, str]:
    """(the A/B to run, or None; why not, when None)."""
    framework = case.platform.framework
    if framework is None:
        return None, "the case names no framework: no earlier commit to judge against"
    changes = environment_changes(baseline.provenance.get("environment"), today, own_packages=(framework.name,))
    if not changes:
        return None, "the golden's environment is today's"
    base = last_trusted_commit(runs)
    if base is None:
        return None, (f"the golden's environment is not today's ({', '.join(changes[:SHOWN])}), but the history has "
                      "no trusted passing run with its framework commit to judge against: judged against the golden")
    return EnvironmentFallback(base, tuple(changes)), ""
