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


#: a frozen tiny-grpo baseline (as of 2026-12-01) for tests whose pictures or numbers must not move with a
#: recalibration of baselines/tiny-grpo.yaml (the plot references were drawn against it)
FROZEN_TINY_GRPO_BASELINE = DATA / "plots" / "tiny-grpo-baseline.yaml"


def tiny_grpo_tracker(path: Path, seed: int = 0, baseline: Path = FROZEN_TINY_GRPO_BASELINE) -> Path:
    """A tiny-grpo-shaped tracker (45 steps, eval at 0/15/30/45) from ``baseline``'s golden table with a
    little noise, the late reward 0.2 low from step 30 and a mismatch spike at steps 20-22: a FAIL whose 7 plots
    show every kind of band (absolute, relative, value, slowdown, pooled) and breach markers."""
    import random

    import yaml

    table = yaml.safe_load(Path(baseline).read_text(encoding="utf-8"))["golden"]["table"]
    rng = random.Random(seed)
    summary: dict[int, dict[str, float]] = {}
    evals: dict[int, dict[str, float]] = {}
    for metric, series in table.items():
        for step, value in series.items():
            value *= 1 + rng.uniform(-0.03, 0.03)
            if metric == "response/rewards/mean" and step >= 30:
                value -= 0.2
            if metric == "mismatch/mismatch_k3_kl" and 20 <= step <= 22:
                value = 0.01
            (evals if metric.startswith("eval/") else summary).setdefault(step, {})[metric] = value
    return write_tracker(path, summary, evals)


def run_cli(*argv: str) -> int:
    """What ``autotest.cli.main`` does with these commands: dispatch, one line and exit 2 on a usage error."""
    from autotest.cli import COMMANDS, build_parser
    from autotest.cli.flags import Refused
    from autotest.errors import UsageError

    try:
        args = build_parser().parse_args(list(argv))
        return COMMANDS[args.command](args)
    except (UsageError, Refused) as exc:
        print(f"rl-autotest: error: {exc}")
        return 2
