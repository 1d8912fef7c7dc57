"""Shared builders for the harness's own tests: write xtuner-shaped trackers and baselines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Mapping

ROOT = Path(__file__).resolve().parents[1]
"""The repository root."""
DATA = Path(__file__).resolve().parent / "data"
"""tests/data: corpora and the scripted case, shared by unit and integration tests."""


def write_tracker(path: Path, summary: Mapping[int, Mapping[str, float]],
                  evals: Mapping[int, Mapping[str, float]] | None = None, minibatch: bool = True,
                  tail: str = "") -> Path:
    """Write a tracker.jsonl with xtuner's row kinds: eval-only step 0, mini-batch rows, summary rows."""
    evals = dict(evals or {})
    path.parent.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    if 0 in evals:
        lines.append(json.dumps({**evals.pop(0), "step": 0}))
    for step in sorted(summary):
        if minibatch:
            lines.append(json.dumps({"train_metrics/worker_0/loss": 0.1 * step, "step": step}))
            lines.append(json.dumps({"train_metrics/worker_0/loss": 0.1 * step + 0.2, "step": step}))
        row = dict(summary[step])
        row.update(evals.get(step, {}))
        row["step"] = step
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n" + tail, encoding="utf-8")
    return path


def write_yaml(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def steps(first: int, last: int) -> Iterable[int]:
    return range(first, last + 1)
