from __future__ import annotations

import multiprocessing
from pathlib import Path

from autotest.report.markdown import append_step_summary


def _append(path: str, index: int) -> None:
    for j in range(20):
        append_step_summary(f"worker {index} line {j}\n" * 3, path)


def test_step_summary_appends_are_safe_across_processes(tmp_path):
    path = str(tmp_path / "summary.md")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append, args=(path, i)) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    lines = Path(path).read_text().splitlines()
    assert len(lines) == 3 * 20 * 3
    # each append of three lines stays contiguous
    for k in range(0, len(lines), 3):
        assert lines[k] == lines[k + 1] == lines[k + 2]
