"""Hugging Face Trainer logs (TRL's trainers log through it) → :class:`~autotest.judge.trace.Trace`.

Two shapes, one format name (``hf-trainer``):

- ``trainer_state.json`` (``TrainerState.save_to_json``; in each ``checkpoint-<N>/`` and, after
  ``trainer.save_state()``, in ``output_dir``): a JSON object whose ``log_history`` is a list of rows,
  each ``{...metrics, "step": global_step}`` (``Trainer.log`` appends ``{**logs, "step": ...}``);
- the JSONL a ``TrainerCallback`` writes from ``on_log``: one row per call, ``{"step":
  state.global_step, **logs}`` (``on_log`` gets the logs without the step; the callback adds it).

``Trainer.log`` puts ``epoch`` on every row and logs, at one ``global_step``, a train row (``loss``,
``grad_norm``, ``learning_rate``; TRL's GRPO adds ``reward``, ``reward_std``, ``rewards/<func>/mean``,
``completions/mean_length``, ``entropy``, ``kl``, ``clip_ratio/...``), an eval row (every key
``eval_*``) and, at the end, the summary (``train_runtime``, ``train_samples_per_second``,
``train_steps_per_second``, ``total_flos``, ``train_loss``). Those rows carry different keys and merge;
``epoch`` is bookkeeping and never makes rows "the same" (:mod:`autotest.readers.merge`).

A step with a train row is a training step, a step with an ``eval_``/``test_`` key an eval step; the
summary alone makes neither. Names are kept as logged (``eval_reward``, not ``eval/reward``); a
baseline's ``metric_aliases`` map them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from autotest.errors import UsageError
from autotest.readers.jsonl import iter_rows, raise_file_error
from autotest.judge.trace import Trace
from autotest.readers.trace_builder import Builder, step_of

FORMAT = "hf-trainer"
#: keys Trainer.log puts on every kind of row
BOOKKEEPING = frozenset({"epoch", "num_input_tokens_seen"})
#: the final summary Trainer.train logs once
SUMMARY_KEYS = frozenset({"train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos",
                          "train_loss"})
EVAL_PREFIXES = ("eval_", "test_")


def looks_like_hf_row(row: object) -> bool:
    """A JSONL row a TrainerCallback wrote: Trainer.log's ``epoch``, or eval_* / summary keys."""
    if not isinstance(row, dict) or any(k.startswith(("eval/", "train_metrics/")) for k in row):
        return False  # xtuner's row kinds
    return "epoch" in row or any(k.startswith("eval_") or k in SUMMARY_KEYS for k in row)


def _state_rows(path: Path) -> Iterator[tuple[int, dict, bytes]]:
    """The rows of ``log_history`` as (index, row, its JSON) — one error line for anything else."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read metric log ({exc.strerror}); check the path") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text; pass a Hugging Face trainer_state.json") from None
    try:
        state = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); is the "
                         "trainer_state.json complete (a run killed while saving a checkpoint)?") from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise UsageError(f"{path}: key 'log_history' is {'missing' if isinstance(state, dict) else 'absent (not an object)'}"
                         "; pass a Hugging Face trainer_state.json (TrainerState.save_to_json)")
    for index, row in enumerate(history):
        if not isinstance(row, dict):
            raise UsageError(f"{path}: log_history[{index}] is not an object ({type(row).__name__}); every row "
                             "is {metric: value, ..., \"step\": N}")
        yield index, row, json.dumps(row, sort_keys=True).encode()


def read_hf_trainer(path: Path, keep: frozenset[str] | None = None) -> Trace:
    """Read a trainer_state.json (by its ``.json`` name) or a TrainerCallback JSONL (see the module doc)."""
    state = path.suffix == ".json"
    label = "log_history[{}]".format if state else "line {}".format
    builder = Builder(path, FORMAT, keep, ignored=BOOKKEEPING, label=label)
    rows = _state_rows(path) if state else iter_rows(path, builder.file_warnings)
    try:
        for number, row, line in rows:
            where = f"{path}: {label(number)}" if state else f"{path}:{number}"
            step = step_of(where, row.pop("step", None))
            if not row:
                continue
            if not builder.admit(step, row, number, hash(line.strip())):
                continue
            builder.mark(step, (k.startswith(EVAL_PREFIXES) for k in row if k not in BOOKKEEPING
                                and k not in SUMMARY_KEYS))
            builder.put_row(step, row, number)
    except UsageError:
        if not state:
            raise_file_error(rows)  # type: ignore[arg-type]
        raise
    return builder.build()


def sniff(row: object, line: str | None) -> str | None:
    """A TrainerCallback's JSONL row (a trainer_state.json is told by its ``.json`` name)."""
    return FORMAT if looks_like_hf_row(row) else None
