"""A W&B history as ``run.history()`` returns it (a pandas DataFrame: ``_step`` plus one column per metric),
exported with pandas itself to CSV and to JSON lines; the offline run folder: tests/integration/readers."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.readers.reading import read_trace, sniff_format
from tests.helpers import DATA, run_cli

pandas = pytest.importorskip("pandas")

SCRIPTED = DATA / "baselines" / "scripted.yaml"


def history() -> "pandas.DataFrame":
    """What run.history() gives for the scripted run: NaN where a metric was not logged at a step."""
    rows = [{"_step": 0, "_runtime": 0.1, "_timestamp": 1.7e9, "eval/accuracy": 0.5}]
    for step in range(1, 11):
        rows.append({"_step": step, "_runtime": 0.1 * step, "_timestamp": 1.7e9 + step,
                     "response/rewards/mean": 0.1 + 0.02 * step, "mismatch/mismatch_k3_kl": 1e-14,
                     **({"eval/accuracy": 0.9} if step == 10 else {})})
    return pandas.DataFrame(rows)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_an_exported_history_reads_as_logged(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"history{suffix}"
    if suffix == ".csv":
        history().to_csv(path, index=False)
    else:  # a NaN cell (not logged at that step) is dropped row by row, as scan_history() gives rows
        with path.open("w") as handle:
            for _, row in history().iterrows():
                handle.write(row.dropna().to_json() + "\n")
    assert sniff_format(path) == "wandb"
    trace = read_trace(path)
    assert trace.format == "wandb" and "_runtime" not in trace.series
    assert trace.get("eval/accuracy") == {0: 0.5, 10: 0.9} and trace.eval_steps == (0, 10)
    assert trace.get("response/rewards/mean") == pytest.approx({s: 0.1 + 0.02 * s for s in range(1, 11)})


def test_a_csv_without_step_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "history.csv"
    history().drop(columns=["_step"]).to_csv(path, index=False)
    with pytest.raises(UsageError, match=r"history.csv: CSV has no _step column \(header: _runtime, _timestamp, "):
        read_trace(path)


def test_a_metric_logged_as_a_histogram_is_named(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text('{"_step": 1, "loss": 1.0, "grads": {"_type": "histogram", "bins": [0, 1]}}\n'
                    '{"_step": 2, "loss": 0.5, "done": true}\n')
    trace = read_trace(path, "wandb")
    assert trace.non_numeric == {"grads": ("a dict", "line 1"), "done": ("a bool", "line 2")}


def test_compare_reads_an_exported_history_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "history.csv"
    history().to_csv(path, index=False)
    code = run_cli("compare", "--baseline", str(SCRIPTED), "--current", str(path), "--no-history")
    printed = capsys.readouterr().out
    assert code == 0 and "PASS" in printed, printed


def test_a_csv_with_a_column_twice_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "history.csv"
    frame = history()
    twice = pandas.concat([frame, frame[["response/rewards/mean"]] * 2], axis=1)  # pandas keeps both columns
    twice.to_csv(path, index=False)
    with pytest.raises(UsageError) as info:
        read_trace(path, "wandb")
    assert str(info.value) == (f"{path}:1: column 'response/rewards/mean' appears twice in the header (columns 5 and "
                               "7); export the history again, or rename one")
    frame.to_csv(path)  # the index as an unnamed first column, beside... nothing else unnamed: read as before
    assert read_trace(path, "wandb").get("eval/accuracy") == {0: 0.5, 10: 0.9}


# -- the offline run file's framing (LevelDB log blocks), built here with empty records (the integration test reads
# -- one wandb wrote)

def _chunk(payload: bytes, kind: int = 1, length: int | None = None) -> bytes:
    import struct
    import zlib

    crc = zlib.crc32(payload, zlib.crc32(bytes([kind])))
    return struct.pack("<IHB", crc, len(payload) if length is None else length, kind) + payload


def _run_file(path: Path, *chunks: bytes) -> Path:
    import struct

    path.write_bytes(b":W&B" + struct.pack("<HB", 0xBEE1, 0) + b"".join(chunks))
    return path


def test_a_corrupt_record_length_is_named_not_taken_for_a_run_that_never_started(tmp_path: Path) -> None:
    pytest.importorskip("wandb")
    path = _run_file(tmp_path / "run-x.wandb", _chunk(b""), _chunk(b""), _chunk(b"abc", length=40000), b"abc")
    with pytest.raises(UsageError) as info:
        read_trace(path)
    assert str(info.value) == (f"{path}: W&B run file is corrupt at byte 21 (record 3 declares 40000 bytes, past the "
                               "end of its 32 KiB block; 2 records before it are intact); restore the file or rerun")
    _run_file(path, _chunk(b""), bytes(7), _chunk(b""))
    with pytest.raises(UsageError, match=r"corrupt at byte 14 \(record 2 is a zeroed header with data after it; 1 "):
        read_trace(path)


def test_a_cut_short_last_record_is_dropped_with_a_warning(tmp_path: Path) -> None:
    pytest.importorskip("wandb")
    path = _run_file(tmp_path / "run-x.wandb", _chunk(b""), _chunk(b"abcdef")[:10])
    with pytest.raises(UsageError, match=r"run-x.wandb: metric log has no rows \(its last record was cut short\); "
                                         r"did the run start\?$"):
        read_trace(path)
    from autotest.readers.wandb_history import _records

    warnings: list[str] = []
    assert [n for n, _ in _records(path, warnings)] == [1]
    assert warnings == [f"{path}: truncated final record dropped at byte 14 (the run was probably killed)"]
    warnings.clear()
    _run_file(path, _chunk(b""), _chunk(b"ab", kind=2))  # a FIRST chunk whose LAST never came
    assert [n for n, _ in _records(path, warnings)] == [1] and len(warnings) == 1
