"""Fuzz the metric-log readers through a whole comparison (tracker → verdict): xtuner tracker JSONL, verl
JSONL and TensorBoard event files, held against the scripted case's baseline.

Each property: a verdict, or one UsageError line naming the log; and never a PASS when some gated
(metric, step) the baseline checks was not logged as a finite number (read independently of the reader).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, strategies as st

from autotest.inputs.baseline import load_baseline
from autotest.judge.model import PASS
from autotest.judge.verdict import compare_paths
from tests.fuzz.strategies import EDGE_NUMBERS, JSON, TEXT, corrupted, json_text, mutated, scratch, \
    verdict_or_one_line
from tests.helpers import DATA

BASELINE = DATA / "baselines" / "scripted.yaml"
GOLDEN = {m: dict(v) for m, v in load_baseline(BASELINE).golden_table.items()}
METRICS = sorted(GOLDEN)
#: the (metric, step) points the baseline's gates read: stepwise checks at every golden step, eval at the last
GATED = {(m, s) for m in ("response/rewards/mean", "mismatch/mismatch_k3_kl") for s in GOLDEN[m]} | {
    ("eval/accuracy", max(GOLDEN["eval/accuracy"]))}


def xtuner_rows() -> list[dict[str, Any]]:
    """The golden run as xtuner logs it: an eval-only row at 0, mini-batch and summary rows, eval at the end."""
    rows: list[dict[str, Any]] = [{"eval/accuracy": GOLDEN["eval/accuracy"][0], "step": 0}]
    for step in sorted(GOLDEN["response/rewards/mean"]):
        rows.append({"train_metrics/worker_0/loss": 0.1 * step, "step": step})
        rows.append({m: GOLDEN[m][step] for m in METRICS if m != "eval/accuracy"} | {"step": step})
    last = max(GOLDEN["eval/accuracy"])
    rows.append({"eval/accuracy": GOLDEN["eval/accuracy"][last], "step": last})
    return rows


def verl_rows() -> list[dict[str, Any]]:
    steps = sorted({s for series in GOLDEN.values() for s in series})
    return [{"step": s, "data": {m: GOLDEN[m][s] for m in METRICS if s in GOLDEN[m]}} for s in steps]


def _lines(rows: list[Any]) -> str:
    return "".join((row if isinstance(row, str) else json_text(row)) + "\n" for row in rows)


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    return row["data"] if isinstance(row.get("data"), dict) else row


def logged_points(text: str, verl: bool = False) -> set[tuple[str, int]]:
    """Every (metric, step) some line of ``text`` logs as a finite number: Python's own JSON parser, no reader."""
    points = set()
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if not isinstance(row, dict):
            continue
        step = row.get("step")
        if type(step) is float and step.is_integer():
            step = int(step)
        if type(step) is not int:
            continue
        values = _flat(row) if verl else row
        points |= {(k, step) for k, v in values.items()
                   if type(v) in (int, float) and math.isfinite(v) and isinstance(k, str)}
    return points


def judge(path: Path, fmt: str, points: set[tuple[str, int]] | None) -> None:
    """The property: a verdict or one line naming the log; a PASS only when every gated point was logged."""
    comparison = verdict_or_one_line(lambda: compare_paths(BASELINE, path, fmt=fmt), path)
    if comparison is not None and comparison.verdict.status == PASS and points is not None:
        missing = GATED - points
        assert not missing, f"PASS although {sorted(missing)[:5]} were never logged as finite numbers"


def test_the_golden_logs_pass() -> None:
    """The seeds: unchanged, each format passes (so every failure below is the damage's)."""
    with scratch() as folder:
        for name, rows, fmt in (("tracker.jsonl", xtuner_rows(), "xtuner"), ("verl.jsonl", verl_rows(), "verl")):
            (folder / name).write_text(_lines(rows), encoding="utf-8")
            assert compare_paths(BASELINE, folder / name, fmt=fmt).verdict.status == PASS


STEP = st.one_of(EDGE_NUMBERS, st.integers(-3, 12), st.integers(), TEXT, st.none())
RAW_LINES = st.sampled_from(['{"step": 1, "step": 2}', '{"step": 3, "response/rewards/mean": 0.16, '
                             '"response/rewards/mean": 9}', "[1, 2]", "null", '"text"', "", "   ", "{", '{"step": 4,',
                             "NaN", '{"step": 5, "response/rewards/mean": NaN}', '{"step": -Infinity}',
                             '{"\\ud800": 1, "step": 1}', '{"step": 1e400}'])


@st.composite
def damaged_rows(draw: st.DrawFn, rows: list[dict[str, Any]], verl: bool) -> list[Any]:
    """The golden rows with 1-6 edits: a row changed, dropped, repeated; a made-up row; a raw line."""
    out: list[Any] = list(rows)
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(out)))
        kind = draw(st.sampled_from(["mutate", "mutate", "drop", "repeat", "new", "raw"]))
        if kind == "mutate" and at < len(out) and isinstance(out[at], dict):
            out[at] = draw(mutated(out[at]))
        elif kind == "drop" and at < len(out):
            del out[at]
        elif kind == "repeat" and at < len(out):
            out.insert(draw(st.integers(0, len(out))), out[at])
        elif kind == "new":
            values = draw(st.dictionaries(st.one_of(st.sampled_from(METRICS), TEXT), JSON, max_size=4))
            row = {"step": draw(STEP), **({"data": values} if verl else values)}
            out.insert(at, row)
        else:
            out.insert(at, draw(RAW_LINES))
    return out


@given(rows=damaged_rows(xtuner_rows(), verl=False))
def test_xtuner_tracker_structured(rows: list[Any]) -> None:
    with scratch() as folder:
        text = _lines(rows)
        path = folder / "tracker.jsonl"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        judge(path, "xtuner", logged_points(text))


@given(data=corrupted(_lines(xtuner_rows()).encode()))
def test_xtuner_tracker_bytes(data: bytes) -> None:
    with scratch() as folder:
        path = folder / "tracker.jsonl"
        path.write_bytes(data)
        judge(path, "xtuner", logged_points(data.decode("utf-8", "replace")))


@given(data=corrupted(_lines(xtuner_rows()).encode()))
def test_auto_format_bytes(data: bytes) -> None:
    """``--format auto`` sniffs the first row: a damaged one must not send the log to the wrong reader silently."""
    with scratch() as folder:
        path = folder / "tracker.jsonl"
        path.write_bytes(data)
        judge(path, "auto", logged_points(data.decode("utf-8", "replace")))


@given(rows=damaged_rows(verl_rows(), verl=True))
def test_verl_jsonl_structured(rows: list[Any]) -> None:
    with scratch() as folder:
        text = _lines(rows)
        path = folder / "verl.jsonl"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        judge(path, "verl", logged_points(text, verl=True))


@given(data=corrupted(_lines(verl_rows()).encode()))
def test_verl_jsonl_bytes(data: bytes) -> None:
    with scratch() as folder:
        path = folder / "verl.jsonl"
        path.write_bytes(data)
        judge(path, "verl", logged_points(data.decode("utf-8", "replace"), verl=True))


# --- TensorBoard -------------------------------------------------------------------------------------------


def _events(folder: Path, scalars: list[tuple[str, int, float]]) -> Path:
    """One event file of ``simple_value`` scalars, as torch's SummaryWriter (xtuner's) writes them, through
    the tensorboard package's own writer (torch's imports torch: seconds per worker)."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(folder))
    for i, (tag, step, value) in enumerate(scalars):
        summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
        writer.add_event(Event(wall_time=1.7e9 + i, step=step, summary=summary))
    writer.close()
    (path,) = folder.glob("events.out.tfevents.*")
    return path


def golden_scalars() -> list[tuple[str, int, float]]:
    return [(m, s, v) for m in METRICS for s, v in sorted(GOLDEN[m].items())]


@pytest.fixture(scope="module")
def golden_events(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    pytest.importorskip("tensorboard")
    path = _events(tmp_path_factory.mktemp("tb"), golden_scalars())
    assert compare_paths(BASELINE, path, fmt="tensorboard").verdict.status == PASS
    return path.read_bytes()


@given(data=st.data())
def test_tensorboard_bytes(golden_events: bytes, data: st.DataObject) -> None:
    damaged = data.draw(corrupted(golden_events))
    with scratch() as folder:
        path = folder / "events.out.tfevents.1700000000.host.1.0"
        path.write_bytes(damaged)
        # event records carry float32 values behind CRCs: which points survived is the reader's to say
        judge(path, "tensorboard", None)


TB_SCALAR = st.tuples(st.one_of(st.sampled_from(METRICS), st.text(min_size=1, max_size=8)),
                      st.one_of(st.integers(-5, 12), st.sampled_from([2**31, 2**62, -(2**40)])),
                      st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.5, 1e-14])))


@given(edits=st.lists(TB_SCALAR, max_size=8), drop=st.sets(st.integers(0, 40), max_size=10))
def test_tensorboard_structured(golden_events: bytes, edits: list[tuple[str, int, float]], drop: set[int]) -> None:
    scalars = [s for i, s in enumerate(golden_scalars()) if i not in drop] + edits
    with scratch() as folder:
        path = _events(folder, scalars)
        points = {(tag, step) for tag, step, value in scalars if math.isfinite(value)}
        # a later non-finite event for the same (tag, step) wins: the point is then not finite
        for tag, step, value in scalars:
            if not math.isfinite(value):
                points.discard((tag, step))
        judge(path, "tensorboard", points)
