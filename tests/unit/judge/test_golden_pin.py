"""A golden reference tracker is pinned by sha256 and step count: a changed file is one ERROR line."""

from __future__ import annotations

import hashlib

import pytest

from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from autotest.judge.verdict import golden_trace
from tests.helpers import write_tracker, write_yaml

CHECKS = """checks:
  - {metric: response/rewards/mean, method: absolute, operator: "<", threshold: 0.1}
"""


def _baseline(tmp_path, pin: str):
    tracker = write_tracker(tmp_path / "share" / "tracker.jsonl", {s: {"response/rewards/mean": 0.5} for s in (1, 2, 3)})
    return tracker, write_yaml(tmp_path / "b.yaml", f"golden:\n  tracker: share/tracker.jsonl\n{pin}{CHECKS}")


def test_the_reviewed_file_loads(tmp_path):
    tracker, _ = _baseline(tmp_path, "")
    sha = hashlib.sha256(tracker.read_bytes()).hexdigest()
    _, path = _baseline(tmp_path, f"  tracker_sha256: {sha}\n  tracker_steps: 3\n")
    assert golden_trace(load_baseline(path)).train_steps == (1, 2, 3)


def test_a_changed_file_names_both_hashes(tmp_path):
    _, path = _baseline(tmp_path, f"  tracker_sha256: '{'0' * 64}'\n")
    with pytest.raises(UsageError) as info:
        golden_trace(load_baseline(path))
    message = str(info.value)
    assert "\n" not in message and "golden tracker changed since the baseline was reviewed" in message
    assert "0" * 64 in message and hashlib.sha256((tmp_path / "share" / "tracker.jsonl").read_bytes()).hexdigest() in message


def test_a_different_step_count_is_named(tmp_path):
    _, path = _baseline(tmp_path, "  tracker_steps: 45\n")
    with pytest.raises(UsageError, match="has 3 training steps, the baseline says 45"):
        golden_trace(load_baseline(path))


def test_a_malformed_pin_is_a_load_error(tmp_path):
    _, path = _baseline(tmp_path, "  tracker_sha256: abc\n")
    with pytest.raises(UsageError, match=r"golden.tracker_sha256: 'abc' is not the sha256"):
        load_baseline(path)
