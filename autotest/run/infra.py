"""Tell infrastructure failures from regressions, and decide whether a run is relaunched.

A failed run's log is scanned for known signatures (GPU out of memory, NCCL timeout, port
in use, a dead teacher server, Ray losing its GCS, a full disk, ...). A known infra
failure may be relaunched a few times, per the policy for its kind; an accuracy FAIL is a
verdict about the code and is never relaunched. Every attempt and decision is kept in a
RetryTrail that the report renders, so a relaunch is never silent.

Pure logic: nothing here launches or sleeps; the launcher acts on the decisions.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

from autotest.errors import UsageError
from autotest.redaction import redact

_EXCERPT_BEFORE = 2
_EXCERPT_AFTER = 2
_EXCERPT_LINE_CHARS = 400
# `bash` prints "Killed" for a SIGKILLed child; it exits 128+9, Popen reports -9.
_SIGKILL_EXIT_CODES = frozenset({137, -9})


class InfraKind(str, Enum):
    """A class of infrastructure failure; the retry policy is keyed by it."""

    OOM = "oom"
    NCCL_TIMEOUT = "nccl_timeout"
    NCCL_ERROR = "nccl_error"
    PORT_IN_USE = "port_in_use"
    SERVER_DIED = "server_died"
    RAY = "ray"
    DISK_FULL = "disk_full"
    GPU_FAULT = "gpu_fault"
    SHARED_FS = "shared_fs"
    #: not a log signature: a performance gate the runner's contention explains (autotest.judge.performance)
    CONTENTION = "contention"


@dataclass(frozen=True)
class Signature:
    """A log pattern that identifies one infra failure kind."""

    kind: InfraKind
    name: str
    pattern: str
    # Only counts when the run exited with one of these codes (None: any exit code).
    exit_codes: frozenset[int] | None = None


# Order within a kind does not matter; across kinds, _PRIORITY decides the root cause.
SIGNATURES: tuple[Signature, ...] = (
    Signature(InfraKind.OOM, "CUDA out of memory", r"CUDA out of memory|torch\.(?:cuda\.)?OutOfMemoryError"),
    Signature(InfraKind.OOM, "Ray node low on memory", r"ray\.exceptions\.OutOfMemoryError|node running low on memory"),
    Signature(InfraKind.OOM, "OutOfMemoryError", r"\bOutOfMemoryError\b"),
    Signature(InfraKind.OOM, "process Killed (exit 137)", r"(?:^|\s)Killed(?:\s|$)", _SIGKILL_EXIT_CODES),
    Signature(InfraKind.NCCL_TIMEOUT, "NCCL watchdog timeout", r"Watchdog caught collective operation timeout"),
    Signature(InfraKind.NCCL_TIMEOUT, "NCCL work timed out", r"WorkNCCL\(.*\) ran for \d+ milliseconds before timing out"),
    # `NCCL\b` skips settings such as NCCL_TIMEOUT=1800 in an environment print.
    Signature(InfraKind.NCCL_TIMEOUT, "NCCL timeout", r"(?i:\bNCCL\b[^=\n]*\b(?:timeout|timed out)\b)(?![^\n]*\bset to\b)"),
    Signature(InfraKind.NCCL_ERROR, "NCCL error", r"\bNCCL error\b|ncclSystemError|ncclUnhandledCudaError|ncclRemoteError"),
    Signature(InfraKind.PORT_IN_USE, "Address already in use", r"(?i:address already in use)|\bEADDRINUSE\b|\[Errno 98\]"),
    Signature(
        InfraKind.SERVER_DIED,
        "server exited",
        r"(?i:\b(?:teacher|rollout|inference|api)[ _]server\b[^\n]*\b(?:exited|died|terminated unexpectedly)\b)",
    ),
    # Readiness polling prints "Connection refused" in healthy runs; only an exception counts.
    Signature(
        InfraKind.SERVER_DIED,
        "Connection refused",
        r"ConnectionRefusedError|\w+(?:Error|Exception)\b[^\n]*Connection refused",
    ),
    Signature(InfraKind.RAY, "RaySystemError", r"\bRaySystemError\b"),
    Signature(InfraKind.RAY, "GCS failure", r"(?i:failed to connect to (?:the )?GCS)|\bGCS\b[^\n]*\b(?:failed|timed out|unavailable|is down)\b"),
    Signature(InfraKind.RAY, "Ray node marked dead", r"has been marked dead because the detector has missed too many heartbeats"),
    Signature(InfraKind.DISK_FULL, "No space left on device", r"No space left on device|\bENOSPC\b|\[Errno 28\]"),
    Signature(
        InfraKind.GPU_FAULT,
        "GPU hardware fault",
        r"(?i:uncorrectable ECC error|GPU has fallen off the bus|CUDA-capable device\(s\) is/are busy or unavailable)",
    ),
    Signature(InfraKind.SHARED_FS, "Stale file handle", r"Stale file handle|\bESTALE\b"),
)

# Root causes before the symptoms they cause: an OOM on one rank makes the others hit the
# NCCL watchdog, and any of them can take Ray down.
_PRIORITY: tuple[InfraKind, ...] = (
    InfraKind.DISK_FULL,
    InfraKind.GPU_FAULT,
    InfraKind.SHARED_FS,
    InfraKind.OOM,
    InfraKind.PORT_IN_USE,
    InfraKind.SERVER_DIED,
    InfraKind.NCCL_ERROR,
    InfraKind.NCCL_TIMEOUT,
    InfraKind.RAY,
)

_COMBINED = re.compile("|".join(f"(?P<s{i}>{s.pattern})" for i, s in enumerate(SIGNATURES)), re.MULTILINE)


@dataclass(frozen=True)
class InfraFailure:
    """One recognised infra failure: its kind, the signature that matched, where, and context."""

    kind: InfraKind
    signature: str
    line_number: int
    excerpt: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "signature": self.signature,
            "line_number": self.line_number,
            "excerpt": self.excerpt,
        }


def _signature_of(line: str, exit_code: int | None) -> Signature | None:
    for match in _COMBINED.finditer(line):
        signature = SIGNATURES[int(match.lastgroup[1:])]  # type: ignore[index]
        if signature.exit_codes is None or exit_code in signature.exit_codes:
            return signature
    return None


def find_failures(lines: Iterable[str], exit_code: int | None = None) -> list[InfraFailure]:
    """Every kind found in the log, each at its first line, in log order (streams the lines)."""
    before: deque[str] = deque(maxlen=_EXCERPT_BEFORE)
    open_hits: list[tuple[Signature, int, list[str], int]] = []  # signature, line, excerpt, lines still wanted
    found: dict[InfraKind, InfraFailure] = {}
    seen: set[InfraKind] = set()

    def close(hit: tuple[Signature, int, list[str], int]) -> None:
        signature, line_number, excerpt, _ = hit
        # the excerpt is copied into results.json, report.md and the step summary: mask it first
        found[signature.kind] = InfraFailure(signature.kind, signature.name, line_number, redact("\n".join(excerpt)))

    for line_number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")[:_EXCERPT_LINE_CHARS]
        still_open = []
        for hit in open_hits:
            hit[2].append(line)
            if hit[3] > 1:
                still_open.append((hit[0], hit[1], hit[2], hit[3] - 1))
            else:
                close(hit)
        open_hits = still_open
        signature = _signature_of(raw, exit_code)
        if signature is not None and signature.kind not in seen:
            seen.add(signature.kind)
            open_hits.append((signature, line_number, [*before, line], _EXCERPT_AFTER))
        before.append(line)
    for hit in open_hits:
        close(hit)
    return sorted(found.values(), key=lambda failure: failure.line_number)


def classify(log_text: str | Iterable[str], exit_code: int | None = None) -> InfraFailure | None:
    """The most likely root-cause infra failure in a log, or None when no signature matches."""
    lines = log_text.splitlines() if isinstance(log_text, str) else log_text
    failures = find_failures(lines, exit_code)
    if not failures:
        return None
    return min(failures, key=lambda failure: (_PRIORITY.index(failure.kind), failure.line_number))


def classify_log_file(path: str | Path, exit_code: int | None = None) -> InfraFailure | None:
    """classify() over a log file, read line by line (logs can be large and not valid UTF-8)."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        return classify(handle, exit_code)


def contention_failure(messages: Sequence[str]) -> InfraFailure:
    """The infra failure of a run whose performance gates the runner's contention explains (their messages)."""
    return InfraFailure(InfraKind.CONTENTION, "runner contention", 0, redact("\n".join(messages)))


# ---- retry policy and decisions -------------------------------------------------------------

VERDICTS = ("PASS", "FAIL", "ERROR")


@dataclass(frozen=True)
class KindPolicy:
    """How often one kind of infra failure may be relaunched, and how long to wait first."""

    max_relaunches: int
    backoff_s: float
    backoff_factor: float = 2.0
    #: why this kind is not relaunched, said in the report (kinds with max_relaunches 0)
    note: str = ""


@dataclass(frozen=True)
class RetryPolicy:
    """Per-kind relaunch limits plus a cap on relaunches of one run whatever the kinds."""

    per_kind: Mapping[InfraKind, KindPolicy]
    max_total_relaunches: int = 2

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str) -> RetryPolicy:
        """Build from {"max_total_relaunches": N, "kinds": {kind: {max_relaunches, backoff_s}}}."""
        known = {kind.value: kind for kind in InfraKind}
        per_kind = dict(DEFAULT_POLICY.per_kind)
        for name, entry in dict(data.get("kinds", {})).items():
            if name not in known:
                raise UsageError(f"{source}: retry.kinds.{name}: unknown infra kind; use one of {', '.join(known)}")
            if not isinstance(entry, Mapping) or not isinstance(entry.get("max_relaunches"), int):
                raise UsageError(f"{source}: retry.kinds.{name}.max_relaunches: give an integer >= 0")
            per_kind[known[name]] = KindPolicy(
                max_relaunches=entry["max_relaunches"],
                backoff_s=float(entry.get("backoff_s", per_kind[known[name]].backoff_s)),
                backoff_factor=float(entry.get("backoff_factor", 2.0)),
            )
        total = data.get("max_total_relaunches", DEFAULT_POLICY.max_total_relaunches)
        if not isinstance(total, int) or total < 0:
            raise UsageError(f"{source}: retry.max_total_relaunches: give an integer >= 0, got {total!r}")
        return cls(per_kind=per_kind, max_total_relaunches=total)


# A relaunch costs a whole run (up to hours on 8 GPUs), so limits are low. Kinds that a
# relaunch on the same node cannot fix (full disk, broken GPU) get none.
DEFAULT_POLICY = RetryPolicy(
    per_kind={
        InfraKind.PORT_IN_USE: KindPolicy(max_relaunches=2, backoff_s=30),
        InfraKind.RAY: KindPolicy(max_relaunches=2, backoff_s=30),
        # The servers a run depends on (teachers, rollout servers) are started by the run itself: one
        # dying is the run's failure, and a relaunch would launder a crash into a PASS.
        InfraKind.SERVER_DIED: KindPolicy(max_relaunches=0, backoff_s=0, note=(
            "a server the run started itself died; that is the run's failure, not the infrastructure's")),
        InfraKind.NCCL_TIMEOUT: KindPolicy(max_relaunches=1, backoff_s=60),
        InfraKind.NCCL_ERROR: KindPolicy(max_relaunches=1, backoff_s=60),
        # Leftover processes can hold GPU memory; a second OOM means the change needs more.
        InfraKind.OOM: KindPolicy(max_relaunches=1, backoff_s=60),
        InfraKind.SHARED_FS: KindPolicy(max_relaunches=1, backoff_s=60),
        # a neighbour's job usually ends: one relaunch after a pause; a second busy run stays an environment
        # outcome (exit 75) for CI to retry on another runner, never a FAIL and never a PASS
        InfraKind.CONTENTION: KindPolicy(max_relaunches=1, backoff_s=30),
        InfraKind.DISK_FULL: KindPolicy(max_relaunches=0, backoff_s=0),
        InfraKind.GPU_FAULT: KindPolicy(max_relaunches=0, backoff_s=0),
    },
    max_total_relaunches=2,
)


@dataclass(frozen=True)
class Classification:
    """What one finished attempt was: the run verdict and the infra failure found, if any."""

    verdict: str
    infra: InfraFailure | None = None
    log_path: str | None = None

    def __post_init__(self) -> None:
        assert self.verdict in VERDICTS, self.verdict


@dataclass(frozen=True)
class RetryDecision:
    """Relaunch or not, after how long, and why (one sentence for the report)."""

    retry: bool
    wait_s: float
    reason: str


@dataclass(frozen=True)
class Attempt:
    """One attempt of a run and the decision taken after it."""

    number: int
    classification: Classification
    decision: RetryDecision


def decide_retry(history: Sequence[Attempt], classification: Classification, policy: RetryPolicy) -> RetryDecision:
    """Whether to relaunch after an attempt, given the attempts before it."""
    infra = classification.infra
    if classification.verdict == "PASS":
        return RetryDecision(False, 0.0, "passed")
    if classification.verdict == "FAIL":
        return RetryDecision(False, 0.0, "accuracy FAIL is a verdict on the code; it is never relaunched")
    if infra is None:
        return RetryDecision(False, 0.0, "no known infrastructure signature in the log; not relaunched")
    kind_policy = policy.per_kind.get(infra.kind)
    if kind_policy is None or kind_policy.max_relaunches == 0:
        why = (kind_policy.note if kind_policy else "") or "the policy allows no relaunch (needs a person)"
        return RetryDecision(False, 0.0, f"{infra.kind.value}: {why}; not relaunched")
    same_kind = sum(1 for a in history if a.classification.infra and a.classification.infra.kind == infra.kind)
    if same_kind >= kind_policy.max_relaunches:
        return RetryDecision(
            False, 0.0, f"{infra.kind.value}: already relaunched {same_kind} time(s), the limit for this kind"
        )
    if len(history) >= policy.max_total_relaunches:
        return RetryDecision(
            False, 0.0, f"already relaunched {len(history)} time(s), the limit for one run"
        )
    wait_s = kind_policy.backoff_s * kind_policy.backoff_factor**same_kind
    return RetryDecision(
        True, wait_s, f"{infra.kind.value} ({infra.signature}): relaunch {same_kind + 1} of {kind_policy.max_relaunches}"
    )


@dataclass(frozen=True)
class RetryTrail:
    """Every attempt of one run with its classification and decision, in order."""

    attempts: tuple[Attempt, ...] = field(default_factory=tuple)

    def record(self, classification: Classification, policy: RetryPolicy) -> tuple[RetryTrail, RetryDecision]:
        """Decide on a finished attempt and return the longer trail with the decision."""
        decision = decide_retry(self.attempts, classification, policy)
        attempt = Attempt(len(self.attempts) + 1, classification, decision)
        return replace(self, attempts=(*self.attempts, attempt)), decision

    def relocated(self, number: int, results_dir: Path, kept: Path) -> RetryTrail:
        """The trail with attempt ``number``'s log path moved from ``results_dir`` into ``kept``."""
        attempts = []
        for a in self.attempts:
            path = a.classification.log_path
            if a.number == number and path and Path(path).is_relative_to(results_dir):
                moved = str(kept / Path(path).relative_to(results_dir))
                a = replace(a, classification=replace(a.classification, log_path=moved))
            attempts.append(a)
        return replace(self, attempts=tuple(attempts))

    def to_dict(self) -> list[dict[str, Any]]:
        return [
            {
                "attempt": a.number,
                "verdict": a.classification.verdict,
                "log_path": a.classification.log_path,
                "infra": a.classification.infra.to_dict() if a.classification.infra else None,
                "decision": {"retry": a.decision.retry, "wait_s": a.decision.wait_s, "reason": a.decision.reason},
            }
            for a in self.attempts
        ]

    def to_markdown(self) -> str:
        """The report section: a table of attempts, then each infra excerpt with its source line."""
        if not self.attempts:
            return ""
        rows = ["### Attempts", "", "| attempt | verdict | infra failure | decision |", "|---|---|---|---|"]
        for a in self.attempts:
            infra = a.classification.infra
            found = f"{infra.kind.value}: {infra.signature}" if infra else "none found"
            action = f"relaunch after {a.decision.wait_s:g} s" if a.decision.retry else "stop"
            rows.append(f"| {a.number} | {a.classification.verdict} | {found} | {action}: {a.decision.reason} |")
        for a in self.attempts:
            infra = a.classification.infra
            if infra is None:
                continue
            where = f"{a.classification.log_path or 'log'}:{infra.line_number}"
            rows += ["", f"Attempt {a.number}, `{where}`:", "", "```", infra.excerpt.replace("```", "'''"), "```"]
        return "\n".join(rows) + "\n"
