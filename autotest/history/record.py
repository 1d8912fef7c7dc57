"""Read one results folder into a :class:`RunRecord`: what the history store keeps of a verdict.

Pure reading: results.json (the verdict, its checks and run context), preflight.json when the
run wrote one (hardware), and the tracker copy (per-metric summaries of the checked metrics).
A run's identity (``run_key``) is its case, start time and the hash of its results.json, so
the same folder ingested twice, or moved to another path, is recorded once.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from autotest.errors import UsageError
from autotest.files import recorded_path
from autotest.history.run_facts import GATE, cost_basis, device_seconds, finite_or_none, load_results_json, run_kind
from autotest.inputs.baseline import load_baseline
from autotest.inputs.tracker_layout import COPY_NAMES, tracker_copy
from autotest.judge.model import RESULTS_SCHEMA_VERSION, STATUSES
from autotest.readers.reading import read_trace

#: a run's verdict (a check may also be INFO)
RUN_STATUSES = ("PASS", "FAIL", "ERROR")
SEVERITIES = ("gate", "reference", "shadow")
#: a case name as case files spell it (the file's stem)
CASE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
#: how results.json writes a non-finite number (autotest.judge.model)
NON_FINITE = ("nan", "inf", "-inf")

#: the last quarter of a run's steps (at least one) is its closing window
LAST_WINDOW_FRACTION = 0.25


@dataclass(frozen=True)
class CheckRecord:
    """One check of one run: the statistic compared with its threshold."""

    check_id: str
    status: str
    severity: str
    metric: str | None = None
    method: str | None = None
    operator: str | None = None
    scope: str | None = None
    #: the number compared with the threshold; None when missing or not finite
    observed: float | None = None
    threshold: float | None = None
    #: the gate's minimum detectable effect at the verdict's replicates (None: a bound, or before MDEs)
    mde: float | None = None

    @property
    def is_gate(self) -> bool:
        return self.severity == "gate"


@dataclass(frozen=True)
class MetricSummary:
    """A checked metric's series in one run, summarised."""

    metric: str
    num_steps: int
    final: float | None
    mean: float | None
    #: mean over the last quarter of the steps
    last_window_mean: float | None


@dataclass(frozen=True)
class RunRecord:
    run_key: str
    case: str
    results_dir: str
    #: ISO 8601, UTC, seconds: launch start, else preflight time, else results.json's mtime
    started_at: str
    status: str
    framework_sha: str | None
    framework_branch: str | None
    framework_dirty: bool | None
    harness_sha: str | None
    hardware: str
    checks: tuple[CheckRecord, ...]
    metrics: tuple[MetricSummary, ...]
    #: why the run was made (:data:`autotest.history.database.RUN_KINDS`); only gate and calibration runs
    #: feed calibrate --from-history, drift and the dashboard's bands
    kind: str = GATE
    #: what could not be read (tracker copy missing ...): recorded anyway, said aloud
    warnings: tuple[str, ...] = ()
    #: what the run cost: ``context.cost.device_seconds`` (None for a results.json written before costs)
    device_seconds: float | None = None
    #: which quantity that cost is: ``context.cost.basis`` (gpu-seconds, cpu-seconds, core-seconds)
    cost_basis: str | None = None


def _utc_iso(text: str | None) -> str | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat(timespec="seconds")


def _kind(value: Any) -> str:
    return {list: "a list", dict: "an object", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__)


def _commit(context: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = context.get(key)
    if not isinstance(value, dict):
        return {}
    for field, kinds in (("sha", str), ("branch", str), ("dirty", bool)):
        if value.get(field) is not None and not isinstance(value[field], kinds):
            raise UsageError(f"{path}: key 'context.{key}.{field}' is {value[field]!r}; expected "
                             f"{'true/false' if kinds is bool else 'text'} (or null)")
    return value


def hardware_fingerprint(preflight: dict[str, Any]) -> str:
    """A short readable description of the machine: GPUs (model, driver, CUDA), CPUs, architecture."""
    env = preflight.get("environment")
    if not isinstance(env, dict):
        return "unknown"
    gpu = env.get("gpu") if isinstance(env.get("gpu"), dict) else {}
    models = [str(m) for m in gpu.get("models") or []]
    parts = []
    if models:
        names = sorted(set(models))
        parts.append(f"{len(models)}x {'/'.join(names)}")
        parts.extend(f"{k} {gpu[k]}" for k in ("driver", "cuda") if gpu.get(k))
    else:
        parts.append("no GPU")
    if env.get("cpu_count"):
        parts.append(f"{env['cpu_count']} CPUs")
    if env.get("machine"):
        parts.append(str(env["machine"]))
    return ", ".join(parts)


def _statistic(item: dict[str, Any], key: str, where: str) -> float | None:
    value = item.get(key)
    if value is None or (isinstance(value, str) and value.lower() in NON_FINITE):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{where}.{key}' is {value!r}; expected a number (or null); "
                         "the results folder is corrupt or not rl-autotest's")
    return finite_or_none(value)


def _text(item: dict[str, Any], key: str, where: str) -> str | None:
    value = item.get(key)
    if value is not None and not isinstance(value, str):
        raise UsageError(f"{where}.{key}' is {value!r}; expected text (or null)")
    return value


def _checks(results: Any, path: Path) -> tuple[CheckRecord, ...]:
    if not isinstance(results, list):
        raise UsageError(f"{path}: key 'results' must be a list of checks")
    checks = []
    for index, item in enumerate(results):
        where = f"{path}: key 'results[{index}]"
        if not isinstance(item, dict) or not item.get("check_id") or not item.get("status"):
            raise UsageError(f"{path}: results[{index}] has no check_id/status; the results folder is corrupt")
        for key in ("metric", "method", "operator", "scope"):  # stored as text columns
            if not (item.get(key) is None or isinstance(item[key], str)):
                raise UsageError(f"{path}: key 'results[{index}].{key}' is {_kind(item[key])}, not text (or null); "
                                 "the results folder is corrupt")
        if item["status"] not in STATUSES:
            raise UsageError(f"{where}.status' is {item['status']!r}; expected one of {', '.join(STATUSES)}")
        severity = item.get("severity") or "gate"
        if severity not in SEVERITIES:
            raise UsageError(f"{where}.severity' is {severity!r}; expected one of {', '.join(SEVERITIES)}")
        checks.append(CheckRecord(
            check_id=str(item["check_id"]), status=item["status"], severity=severity,
            metric=_text(item, "metric", where), method=_text(item, "method", where),
            operator=_text(item, "operator", where), scope=_text(item, "scope", where),
            observed=_statistic(item, "observed", where), threshold=_statistic(item, "threshold", where),
            mde=_statistic(item, "mde", where)))
    ids = [c.check_id for c in checks]
    if len(set(ids)) != len(ids):
        raise UsageError(f"{path}: a check_id appears twice; the results folder is corrupt")
    return tuple(checks)


def check_header(data: dict[str, Any], path: Path) -> tuple[str, str]:
    """results.json's schema version, case and status, checked; returns (case, status)."""
    if "schema_version" not in data:
        raise UsageError(f"{path}: no key 'schema_version'; is this an rl-autotest results.json?")
    version = data["schema_version"]
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= RESULTS_SCHEMA_VERSION:
        raise UsageError(f"{path}: key 'schema_version' is {version!r}; this rl-autotest reads results.json "
                         f"version {RESULTS_SCHEMA_VERSION} (a newer one needs a newer rl-autotest)")
    case, status = data.get("case"), data.get("status")
    if not isinstance(case, str) or not CASE_NAME.fullmatch(case):
        raise UsageError(f"{path}: key 'case' is {case!r}; expected a case name (letters, digits, '.', '_', '-')")
    if status not in RUN_STATUSES:
        raise UsageError(f"{path}: key 'status' is {status!r}; expected one of {', '.join(RUN_STATUSES)}")
    return case, status


def summarise_series(metric: str, series: dict[int, float]) -> MetricSummary:
    values = [float(series[s]) for s in sorted(series) if math.isfinite(series[s])]
    if not values:
        return MetricSummary(metric, len(series), None, None, None)
    window = max(1, round(len(values) * LAST_WINDOW_FRACTION))
    return MetricSummary(metric, len(series), values[-1], sum(values) / len(values),
                         sum(values[-window:]) / window)


def _tracker_of(folder: Path, data: dict[str, Any]) -> Path | None:
    copy = tracker_copy(folder)  # tracker.jsonl, trainer_state.json or tensorboard/
    if copy is not None:
        return copy
    recorded = data.get("current_source")
    source = recorded_path(folder, recorded) if isinstance(recorded, str) and recorded else None
    try:
        return source if source is not None and source.exists() else None  # a TensorBoard log is a folder
    except OSError:  # a name no filesystem holds (too long): no log to summarise
        return None


def _aliases(folder: Path, data: dict[str, Any]) -> dict[str, str]:
    """The judged baseline's metric_aliases (a TensorBoard or Hugging Face log names metrics its own way)."""
    recorded = data.get("baseline_file")
    path = recorded_path(folder, recorded) if isinstance(recorded, str) and recorded else None
    try:
        if path is None or not path.is_file():
            return {}
    except OSError:  # a name no filesystem holds (too long)
        return {}
    try:
        return dict(load_baseline(path).metric_aliases)
    except UsageError:
        return {}


def _metric_summaries(folder: Path, data: dict[str, Any], checks: tuple[CheckRecord, ...]
                      ) -> tuple[tuple[MetricSummary, ...], tuple[str, ...]]:

    metrics = sorted({c.metric for c in checks if c.metric})
    tracker = _tracker_of(folder, data)
    if not metrics:
        return (), ()
    if tracker is None:
        return (), (f"{folder}: no tracker copy ({', '.join(COPY_NAMES)}); per-metric summaries not recorded",)
    try:
        trace = read_trace(tracker, aliases=_aliases(folder, data), metrics=set(metrics))
    except UsageError as exc:
        return (), (f"per-metric summaries not recorded: {exc}",)
    summaries = tuple(summarise_series(m, dict(trace.get(m) or {})) for m in metrics if trace.get(m) is not None)
    return summaries, ()


def read_results_folder(folder: str | Path) -> RunRecord:
    """Read a results folder (it holds results.json) into a RunRecord; a bad folder is a UsageError."""
    folder = Path(folder).resolve()
    path = folder / "results.json"
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such results folder")
    if not path.is_file():
        raise UsageError(f"{folder}: no results.json; pass a results folder (or a results root holding them)")
    raw = path.read_bytes()
    data = load_results_json(path)
    case, status = check_header(data, path)
    kind = run_kind(data, path)
    checks = _checks(data.get("results", []), path)
    context = data.get("context") if isinstance(data.get("context"), dict) else {}
    preflight_path = folder / "preflight.json"
    preflight = load_results_json(preflight_path) if preflight_path.is_file() else {}
    launch = context.get("launch") if isinstance(context.get("launch"), dict) else {}
    started_at = (_utc_iso(launch.get("started_at")) or _utc_iso(preflight.get("created_at"))
                  or datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).isoformat(timespec="seconds"))
    framework = _commit(context, "commit", path) or _commit(preflight, "commit", preflight_path)
    harness = _commit(context, "harness_commit", path) or _commit(preflight, "harness", preflight_path)
    digest = hashlib.sha256(raw).hexdigest()
    run_key = hashlib.sha256(f"{case}\0{started_at}\0{digest}".encode()).hexdigest()[:32]
    metrics, warnings = _metric_summaries(folder, data, checks)
    return RunRecord(
        run_key=run_key, case=case, results_dir=str(folder), started_at=started_at, status=status,
        framework_sha=framework.get("sha"), framework_branch=framework.get("branch"),
        framework_dirty=framework.get("dirty"), harness_sha=harness.get("sha"),
        hardware=hardware_fingerprint(preflight), checks=checks, metrics=metrics, kind=kind, warnings=warnings,
        device_seconds=device_seconds(data, path), cost_basis=cost_basis(data, path))


def find_results_folders(path: str | Path) -> list[Path]:
    """A results folder itself, or every results folder under a results root (sorted); a run of replicates
    gives its replicates' folders (single runs with their trackers, as the pipeline records them)."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory; pass a results folder or a results root")
    if path.is_file():
        raise UsageError(f"{path}: is a file; pass the results folder that holds results.json")
    if (path / "results.json").is_file():
        folders = [path.resolve()]
    else:
        folders = sorted({p.parent.resolve() for p in path.rglob("results.json")})
        # a results folder's own subfolders (consistency/ ...) are part of it, not runs of their own
        found = set(folders)
        folders = [f for f in folders if not any(parent in found for parent in f.parents)]
    folders = [r for f in folders
               for r in (sorted(p.parent.resolve() for p in f.glob("replicates/*/results.json")) or [f])]
    if not folders:
        raise UsageError(f"{path}: no results.json in it or below; pass a results folder or a results root")
    return folders
