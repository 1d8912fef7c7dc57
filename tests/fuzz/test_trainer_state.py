"""Fuzz the Hugging Face Trainer reader through a whole comparison: a trainer_state.json (``log_history``
rows as ``Trainer.log`` writes them: train rows with ``epoch``, eval rows, the final summary) changed row by
row or corrupted byte by byte, held against data/hf-trainer.yaml.

Property: a verdict, or one UsageError line naming trainer_state.json; never a PASS when a gated
(metric, step) was not logged as a finite number in some row (read with Python's JSON parser, no reader).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from hypothesis import given, strategies as st

from autotest.judge.model import PASS
from autotest.judge.verdict import compare_paths
from tests.fuzz.strategies import corrupted, json_text, mutated, scratch, verdict_or_one_line


BASELINE = Path(__file__).with_name("data") / "hf-trainer.yaml"
REWARD = {1: 0.12, 2: 0.14, 3: 0.16, 4: 0.18, 5: 0.2, 6: 0.22}
EVAL = {3: 0.5, 6: 0.9}
GATED = {("reward", s) for s in REWARD} | {("eval_reward", 6)}


def state() -> dict[str, Any]:
    """A trainer_state.json as TrainerState.save_to_json writes it."""
    rows: list[dict[str, Any]] = []
    for step, reward in REWARD.items():
        rows.append({"loss": 0.5 / step, "grad_norm": 1.0, "learning_rate": 1e-5, "reward": reward,
                     "epoch": step / 6, "step": step})
        if step in EVAL:
            rows.append({"eval_reward": EVAL[step], "eval_runtime": 0.1, "epoch": step / 6, "step": step})
    rows.append({"train_runtime": 12.5, "train_samples_per_second": 4.0, "train_steps_per_second": 0.5,
                 "total_flos": 0.0, "train_loss": 0.2, "epoch": 1.0, "step": 6})
    return {"best_metric": None, "epoch": 1.0, "global_step": 6, "log_history": rows, "max_steps": 6,
            "logging_steps": 1, "trial_name": None}


def logged(doc: Any) -> set[tuple[str, int]]:
    rows = doc.get("log_history") if isinstance(doc, dict) else None
    points = set()
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict):
            continue
        step = row.get("step")
        if type(step) is float and step.is_integer():
            step = int(step)
        if type(step) is int:
            points |= {(k, step) for k, v in row.items() if type(v) in (int, float) and math.isfinite(v)}
    return points


def judge(path: Path, doc: Any) -> None:
    """The property; ``doc`` is what the file holds as Python's JSON parser reads it ({} if nothing)."""
    comparison = verdict_or_one_line(lambda: compare_paths(BASELINE, path, fmt="hf-trainer"), path)
    if comparison is not None and comparison.verdict.status == PASS:
        missing = GATED - logged(doc)
        assert not missing, f"PASS although {sorted(missing)} were never logged as finite numbers"


def test_the_seed_passes() -> None:
    with scratch() as folder:
        path = folder / "trainer_state.json"
        path.write_text(json.dumps(state(), indent=2), encoding="utf-8")
        assert compare_paths(BASELINE, path, fmt="hf-trainer").verdict.status == PASS


@given(data=st.data())
def test_trainer_state_structured(data: st.DataObject) -> None:
    doc: Any = state()
    for _ in range(data.draw(st.integers(1, 4))):
        # mostly the rows: that is where the metrics are
        rows = doc.get("log_history") if isinstance(doc, dict) else None
        if isinstance(rows, list) and data.draw(st.booleans()):
            doc = {**doc, "log_history": data.draw(mutated(rows))}
        else:
            doc = data.draw(mutated(doc))
    with scratch() as folder:
        path = folder / "trainer_state.json"
        path.write_text(json_text(doc), encoding="utf-8", errors="surrogatepass")
        judge(path, doc)


@given(damaged=corrupted(json.dumps(state(), indent=2).encode()))
def test_trainer_state_bytes(damaged: bytes) -> None:
    with scratch() as folder:
        path = folder / "trainer_state.json"
        path.write_bytes(damaged)
        try:
            doc = json.loads(damaged)
        except ValueError:
            doc = {}  # not JSON: nothing was logged, so no PASS can come of it
        judge(path, doc)
