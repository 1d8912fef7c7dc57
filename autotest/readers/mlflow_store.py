"""MLflow's file store → :class:`~autotest.judge.trace.Trace`, parsed from its files (mlflow need not be installed).

The layout (``mlflow/store/tracking/file_store.py``, ``FileStore``): ``mlruns/<experiment id>/<run id>/`` holds
``meta.yaml`` and ``metrics/<key>``, one file per metric (a key ``reward/mean`` is the file
``metrics/reward/mean``), one line per ``log_metric``: ``<timestamp ms> <value> <step>`` (MLflow also reads
two fields, step 0, and five, with a dataset name and digest after the step).

The log is a run folder; a store (``mlruns/``) or an experiment folder holding several runs is read at its
newest run (by ``meta.yaml``'s modification time), and a warning names the others. A step logged twice with
one metric keeps the line written last (a warning counts them). A metric named ``val*``/``eval*`` makes its
step an eval step.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from autotest.errors import UsageError
from autotest.judge.trace import Trace
from autotest.readers.trace_builder import Builder, step_of

FORMAT = "mlflow"
METRICS = "metrics"
EVAL_PREFIXES = ("val", "eval")


def run_folders(path: Path) -> list[Path]:
    """The MLflow runs at ``path`` (a run folder, or every run below it), oldest first."""
    if (path / METRICS).is_dir():
        return [path]
    runs = [meta.parent for meta in path.rglob("meta.yaml") if (meta.parent / METRICS).is_dir()
            and ".trash" not in meta.parts]
    return sorted(runs, key=lambda run: ((run / "meta.yaml").stat().st_mtime_ns, str(run)))


def _line(file: Path, number: int, text: str) -> tuple[int, float]:
    """(step, value) of one metric line."""
    parts = text.split()
    try:
        if len(parts) not in (2, 3, 5):
            raise ValueError
        int(parts[0])
        step, value = int(parts[2]) if len(parts) > 2 else 0, float(parts[1])
    except ValueError:
        raise UsageError(f"{file}:{number}: not an MLflow metric line (expected 'timestamp value step', got "
                         f"{text.strip()[:60]!r}); is this an MLflow file store?") from None
    return step_of(f"{file}:{number}", step), value


def read_mlflow(path: Path, keep: frozenset[str] | None = None) -> Trace:
    """Read a run's ``metrics/`` files (see the module doc)."""
    path = Path(path)
    runs = run_folders(path) if path.is_dir() else []
    if not runs:
        raise UsageError(f"{path}: no MLflow run (a folder with meta.yaml and metrics/) at or below it; pass the "
                         "run folder mlruns/<experiment>/<run>/")
    run = runs[-1]
    builder = Builder(run, FORMAT, keep)
    if len(runs) > 1:
        builder.warnings.append(f"{path}: {len(runs)} MLflow runs; read the newest, {run} (pass a run folder to "
                                f"read another: {', '.join(str(r) for r in runs[:-1][:3])})")
    rows: dict[int, dict[str, float]] = defaultdict(dict)
    lines: dict[int, int] = {}
    relogged = 0
    for file in sorted(p for p in (run / METRICS).rglob("*") if p.is_file()):
        key = file.relative_to(run / METRICS).as_posix()
        builder.names.add(key)
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{file}: cannot read MLflow metric file ({exc}); restore it or rerun") from None
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            step, value = _line(file, number, line)
            relogged += key in rows[step]
            rows[step][key] = value
            lines.setdefault(step, number)
    if relogged:
        builder.warnings.append(f"{run}: {relogged} metric value(s) logged again at a step they already had; the "
                                "line written last wins")
    for step in sorted(rows):
        values = rows[step]
        builder.mark(step, (k.startswith(EVAL_PREFIXES) for k in values))
        builder.put_row(step, values, lines[step])
    if not rows:
        raise UsageError(f"{run}: MLflow run has no metric values (metrics/ is empty); did the run log any?")
    return builder.build()
