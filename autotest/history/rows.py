"""What the history store hands back: a recorded run, one check's statistic in a run, a bisect's finding, an
ingest's outcome and a passing run for ``calibrate --from-history`` (:mod:`autotest.history.store` reads them)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autotest.history.run_facts import GATE, TRUSTED_KINDS

PASS = "PASS"


@dataclass(frozen=True)
class RunRow:
    """One recorded run, as read back from the store."""

    run_id: int
    case: str
    results_dir: str
    started_at: str
    status: str
    framework_sha: str | None
    harness_sha: str | None
    hardware: str
    #: why the run was made (gate, calibration, fault, dry-run, bisect); gate for runs recorded before v2
    kind: str = GATE
    #: the latest trust mark: False when a person marked the run untrusted (``history untrust``)
    marked_trusted: bool = True
    trust_reason: str | None = None
    trust_marked_at: str | None = None
    #: what the run cost (None: recorded before costs, or no cost in its results.json)
    device_seconds: float | None = None
    #: which quantity ``device_seconds`` is: gpu-seconds, cpu-seconds, core-seconds (None: before v6 or unknown)
    cost_basis: str | None = None

    @property
    def trusted(self) -> bool:
        """Feeds calibrate --from-history, drift and the dashboard's bands: a gate or calibration run not
        marked untrusted."""
        return self.kind in TRUSTED_KINDS and self.marked_trusted

    @property
    def why_untrusted(self) -> str:
        if not self.marked_trusted:
            return f"untrusted since {self.trust_marked_at}: {self.trust_reason}"
        return "" if self.kind in TRUSTED_KINDS else f"{self.kind} run"


@dataclass(frozen=True)
class CheckPoint:
    """One gated check's statistic in one run."""

    run: RunRow
    check_id: str
    metric: str | None
    status: str
    operator: str | None
    observed: float | None
    threshold: float | None
    #: the gate's minimum detectable effect in that run (None: a bound, or recorded before v6)
    mde: float | None = None


@dataclass(frozen=True)
class BisectFinding:
    """The first bad commit a bisect named for a case, between two recorded runs' framework commits."""

    case: str
    good_sha: str
    bad_sha: str
    first_bad_sha: str
    subject: str
    author: str
    confidence: str
    bisect_dir: str
    found_at: str = ""
    #: a bisect started from a drift: its window (``2026-01-24 .. 2026-01-27, 3 nights``); the commit is "near"
    near_window: str | None = None

    def describe(self) -> str:
        """``first bad commit X`` (a flip), ``near commit X (window …)`` (a drift)."""
        if self.near_window:
            return f"near commit {self.first_bad_sha[:12]} (window {self.near_window})"
        return f"first bad commit {self.first_bad_sha[:12]}"


@dataclass(frozen=True)
class IngestOutcome:
    recorded: tuple[str, ...]
    already_recorded: tuple[str, ...]
    warnings: tuple[str, ...]
    url: str


@dataclass(frozen=True)
class PassingRun:
    """A passing run for ``calibrate --from-history``: where its evidence is and what it ran."""

    results_dir: Path
    tracker: Path
    framework_sha: str | None
    harness_sha: str | None
