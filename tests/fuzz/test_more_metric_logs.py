"""Fuzz the MLflow, W&B and console readers through a whole comparison, held against the scripted baseline.

Each log is built from points (metric, step, value) that are then changed (a value replaced by an edge
number or text, a point dropped, a line repeated, a raw line inserted) or whose bytes are corrupted. The
property: a verdict, or one UsageError line naming the log; never a PASS when a gated (metric, step) was
not written as a finite number (known from the points written, never from a reader).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from hypothesis import given, strategies as st

from autotest.judge.model import PASS
from autotest.judge.verdict import compare_paths
from tests.fuzz.strategies import EDGE_NUMBERS, TEXT, corrupted, scratch, verdict_or_one_line
from tests.fuzz.test_metric_logs import BASELINE, GATED, GOLDEN

Point = tuple[str, int, Any]
SEED: list[Point] = sorted(((m, s, v) for m, series in GOLDEN.items() for s, v in series.items()),
                           key=lambda p: (p[1], p[0]))
VALUES = st.one_of(EDGE_NUMBERS, st.floats(allow_nan=True, allow_infinity=True), TEXT, st.integers())
STEPS = st.one_of(st.integers(-3, 12), EDGE_NUMBERS, st.just(10**30))
RAW = st.one_of(TEXT, st.sampled_from(["", " ", "step:", "1 2", "x y z", "step:3 - a", "\x00", "1e400 1 1"]))


@st.composite
def damaged_points(draw: st.DrawFn) -> list[Point | str]:
    """The golden points with 1-6 edits; a str is a raw line."""
    out: list[Point | str] = list(SEED)
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(out)))
        kind = draw(st.sampled_from(["value", "step", "drop", "repeat", "raw"]))
        if kind in ("value", "step") and at < len(out) and isinstance(out[at], tuple):
            metric, step, value = out[at]  # type: ignore[misc]
            out[at] = (metric, draw(STEPS), value) if kind == "step" else (metric, step, draw(VALUES))
        elif kind == "drop" and at < len(out):
            del out[at]
        elif kind == "repeat" and at < len(out):
            out.insert(draw(st.integers(0, len(out))), out[at])
        else:
            out.insert(at, draw(RAW))
    return out


def finite(points: list[Point | str]) -> set[tuple[str, int]]:
    return {(p[0], p[1]) for p in points if isinstance(p, tuple) and type(p[1]) is int
            and type(p[2]) in (int, float) and math.isfinite(p[2])}


def judge(path: Path, fmt: str, points: set[tuple[str, int]] | None) -> None:
    comparison = verdict_or_one_line(lambda: compare_paths(BASELINE, path, fmt=fmt), path.name)
    if comparison is not None and comparison.verdict.status == PASS and points is not None:
        missing = GATED - points
        assert not missing, f"PASS although {sorted(missing)[:5]} were never written as finite numbers"


def _text(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def console_text(points: list[Point | str]) -> str:
    """verl's console lines, one per point (verl prints a step's metrics on one line; one each reads alike)."""
    return "".join(p + "\n" if isinstance(p, str) else f"step:{p[1]} - {p[0]}:{_text(p[2])}\n" for p in points)


def mlflow_run(folder: Path, points: list[Point | str]) -> Path:
    """A file-store run: each metric's file gets its points' lines (a raw line goes to the first file)."""
    run = folder / "mlruns" / "0" / "abc"
    (run / "metrics").mkdir(parents=True)
    (run / "meta.yaml").write_text("run_id: abc\n")
    lines: dict[str, list[str]] = {m: [] for m in GOLDEN}
    for n, p in enumerate(points):
        if isinstance(p, str):
            lines[next(iter(lines))].append(p)
        else:
            lines.setdefault(p[0], []).append(f"{1700000000000 + n} {_text(p[2])} {p[1]}")
    for metric, text in lines.items():
        file = run / "metrics" / metric
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text("".join(line + "\n" for line in text), encoding="utf-8", errors="surrogatepass")
    return run


def csv_text(points: list[Point | str]) -> str:
    """A W&B history export: one row per point (other cells empty), _step first."""
    metrics = list(GOLDEN)
    rows = ["_step," + ",".join(metrics)]
    for p in points:
        if isinstance(p, str):
            rows.append(p)
        else:
            cells = [_text(p[2]).replace(",", ";") if m == p[0] else "" for m in metrics]
            rows.append(",".join([str(p[1])] + cells))
    return "".join(r + "\n" for r in rows)


def test_the_golden_logs_pass() -> None:
    with scratch() as folder:
        (folder / "console.log").write_text(console_text(SEED))
        (folder / "history.csv").write_text(csv_text(SEED))
        for path, fmt in ((folder / "console.log", "console:verl"), (mlflow_run(folder, SEED), "mlflow"),
                          (folder / "history.csv", "wandb")):
            assert compare_paths(BASELINE, path, fmt=fmt).verdict.status == PASS, fmt


#: the text formats: (file name, writer of the points)
TEXT_LOGS = {"console:verl": ("console.log", console_text), "wandb": ("history.csv", csv_text)}


@given(points=damaged_points(), fmt=st.sampled_from(sorted(TEXT_LOGS)))
def test_text_logs_structured(points: list[Point | str], fmt: str) -> None:
    name, write = TEXT_LOGS[fmt]
    with scratch() as folder:
        path = folder / name
        path.write_text(write(points), encoding="utf-8", errors="surrogatepass")
        judge(path, fmt, finite(points))


@given(data=st.data(), fmt=st.sampled_from(sorted(TEXT_LOGS)))
def test_text_logs_bytes(data: st.DataObject, fmt: str) -> None:
    name, write = TEXT_LOGS[fmt]
    with scratch() as folder:
        path = folder / name
        path.write_bytes(data.draw(corrupted(write(SEED).encode())))
        judge(path, fmt, None)


@given(points=damaged_points())
def test_mlflow_structured(points: list[Point | str]) -> None:
    with scratch() as folder:
        run = mlflow_run(folder, points)
        comparison = verdict_or_one_line(lambda: compare_paths(BASELINE, run, fmt="mlflow"), ("abc", "mlruns"))
        if comparison is not None and comparison.verdict.status == PASS:
            assert not GATED - finite(points)
