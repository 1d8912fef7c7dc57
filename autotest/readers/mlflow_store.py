"""MLflow's file store → :class:`~autotest.judge.trace.Trace`, parsed from its files (mlflow need not be installed).

The layout (``mlflow/store/tracking/file_store.py``, ``FileStore``): ``mlruns/<experiment id>/<run id>/`` holds
``meta.yaml`` and ``metrics/<key>``, one file per metric (a key ``reward/mean`` is the file
``metrics/reward/mean``), one line per ``log_metric``: ``<timestamp ms> <value> <step>``, or five fields when the
value was logged for a dataset (its name and digest after the step). MLflow's own reader also takes two fields
(``timestamp value``, step 0, as MLflow before 1.0 wrote them); series are aligned by step here, so a line without
its step is an error naming it, and so is a metric whose values name two datasets (they would merge into one series).
MLflow appends each line whole with its newline, so a last line without one was cut short (a killed run): it is
dropped with a warning naming it, as the JSONL readers drop a half-written last line.

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
from autotest.terminal import printable

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


def _line(file: Path, number: int, text: str) -> tuple[int, float, tuple[str, str] | None]:
    """(step, value, the dataset's (name, digest) or None) of one metric line."""
    parts = text.split()
    if len(parts) == 2:
        raise UsageError(f"{file}:{number}: an MLflow metric line without a step ({text.strip()[:60]!r}: "
                         "'timestamp value', as MLflow before 1.0 wrote it); series are aligned by step, so log the "
                         "metric with its step (mlflow.log_metric(key, value, step=N))")
    try:
        if len(parts) not in (3, 5):
            raise ValueError
        int(parts[0])
        step, value = int(parts[2]), float(parts[1])
    except ValueError:
        raise UsageError(f"{file}:{number}: not an MLflow metric line (expected 'timestamp value step', got "
                         f"{text.strip()[:60]!r}); is this an MLflow file store?") from None
    return step_of(f"{file}:{number}", step), value, (parts[3], parts[4]) if len(parts) == 5 else None


def _lines(file: Path, builder: Builder) -> list[tuple[int, str]]:
    """(line number, text) of each line with content; a last line without its newline is dropped with a warning."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{file}: cannot read MLflow metric file ({exc}); restore it or rerun") from None
    lines = [(n, line) for n, line in enumerate(text.split("\n"), 1) if line.strip()]
    if lines and not text.endswith("\n") and lines[-1][0] == text.count("\n") + 1:
        builder.file_warnings.append(f"{file}:{lines[-1][0]}: truncated final line dropped (the run was probably "
                                     "killed)")
        lines.pop()
    return lines


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
        first: tuple[int, tuple[str, str] | None] | None = None  # the file's first line and its dataset
        for number, line in _lines(file, builder):
            step, value, dataset = _line(file, number, line)
            if first is None:
                first = (number, dataset)
            elif dataset != first[1]:
                shown = [f"dataset {d[0]!r} (digest {printable(d[1])})" if d else "no dataset"
                         for d in (dataset, first[1])]
                raise UsageError(f"{file}:{number}: metric {key!r} logged for {shown[0]} here and for {shown[1]} at "
                                 f"line {first[0]}; one series per metric is read, so log each dataset's values under "
                                 "a key of its own")
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
        what = "its only metric line was cut short" if builder.file_warnings else "metrics/ is empty"
        raise UsageError(f"{run}: MLflow run has no metric values ({what}); did the run log any?")
    return builder.build()
