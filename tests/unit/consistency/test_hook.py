"""The hook's log-prob recorder: default off, window step only, read back by the analysis' reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotest.consistency.hook import ENV, record_logprobs
from autotest.consistency.logprob_records import read_logprob_files


def _record(step: int) -> None:
    record_logprobs("recorded", step=step, samples=[0], request_ids=["r0"], positions=[[3, 4]], token_ids=[[7, 8]],
                    logprobs=[[-0.25, -1.5]], dtype="bf16")


def test_unset_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    _record(3)
    assert list(tmp_path.rglob("*")) == []


def test_set_writes_the_window_step_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "diag.json"
    config.write_text(json.dumps({"output_dir": str(tmp_path / "out"), "window_step": 3}))
    monkeypatch.setenv(ENV, str(config))
    _record(2)
    _record(3)
    (records,) = read_logprob_files([tmp_path / "out" / "logprobs"]).values()
    assert [(r.kind, r.step, r.request_id, r.positions, r.logprobs, r.dtype) for r in records] == [
        ("recorded", 3, "r0", (3, 4), (-0.25, -1.5), "low")]
