"""Was the seed honoured? A run must have used the seed it was given, and replicates must differ.

A launcher that stops passing ``--seed`` to training makes every run the same run: calibration then
measures no noise, and K "replicates" are K copies judged with thresholds meant for K independent
seeds. Two pieces of evidence, both cheap:

- the run's saved config (``run_config/``, JSON or YAML) names a ``seed`` (top level, or one level down,
  e.g. ``train.seed``): it must equal the seed the harness asked for;
- runs at different seeds are never bitwise identical on their non-time metrics.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from autotest.judge.model import ERROR, PASS, CheckResult
from autotest.judge.trace import Trace

SEED_KEYS = ("seed", "random_seed")
#: metrics whose value is the machine's, not the seed's: identical or not, they prove nothing (memory included:
#: two copies of one run hold different amounts of memory)
_TIME_WORDS = ("time", "throughput", "tokens_per_s", "tps", "runtime", "samples_per_second", "steps_per_second",
               "memory", "_mem_", "rss")


@dataclass(frozen=True)
class LoggedSeed:
    seed: int
    #: the file and key it was read from
    source: str


def logged_seed(config_files: Sequence[Path]) -> LoggedSeed | None:
    """The seed a run's saved config names, from the first file that names one; None when none does."""
    for path in config_files:
        data = _load(Path(path))
        if not isinstance(data, Mapping):
            continue
        found = _seed_in(data)
        if found is not None:
            key, value = found
            return LoggedSeed(seed=value, source=f"{path}: {key}")
    return None


def _load(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError):
        return None


def _seed_in(data: Mapping[str, Any]) -> tuple[str, int] | None:
    for key in SEED_KEYS:
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return key, value
    for outer, inner in data.items():
        if isinstance(inner, Mapping):
            for key in SEED_KEYS:
                value = inner.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    return f"{outer}.{key}", value
    return None


def seed_result(requested: int, logged: LoggedSeed | None) -> CheckResult | None:
    """``run[seed]``: ERROR when the saved config names another seed than the one asked for."""
    if logged is None:
        return None
    if logged.seed == requested:
        return CheckResult("run[seed]", PASS, f"the run used seed {requested} ({logged.source})",
                           kind="structural", parameters={"requested": requested, "logged": logged.seed})
    return CheckResult(
        "run[seed]", ERROR, kind="structural",
        message=(f"seed not honoured: seed {requested} was asked for but the run's saved config says "
                 f"{logged.seed} ({logged.source}); does the launch still pass {{seed}} to training?"),
        parameters={"requested": requested, "logged": logged.seed})


def seed_metrics(trace: Trace) -> list[str]:
    """The metrics whose values depend on the seed (not timing or throughput)."""
    return [m for m in trace.metrics if not any(word in m.lower() for word in _TIME_WORDS)]


def identical_runs(runs: Sequence[tuple[str, int, Trace]]) -> CheckResult | None:
    """``replicates[seed]``: ERROR when two runs at different seeds logged bitwise-identical metrics."""
    for i, (label_a, seed_a, trace_a) in enumerate(runs):
        for label_b, seed_b, trace_b in runs[i + 1:]:
            if seed_a == seed_b:
                continue
            metrics = [m for m in seed_metrics(trace_a) if m in trace_b.metrics]
            if metrics and all(dict(trace_a.series[m]) == dict(trace_b.series[m]) for m in metrics):
                return CheckResult(
                    "replicates[seed]", ERROR, kind="structural",
                    message=(f"seed not honoured: {label_a} (seed {seed_a}) and {label_b} (seed {seed_b}) logged "
                             f"bitwise-identical values of all {len(metrics)} seed-dependent metrics at every "
                             "step: they are copies of one run, not independent replicates; does the launch "
                             "pass {seed} to training?"),
                    parameters={"runs": [label_a, label_b], "seeds": [seed_a, seed_b], "metrics": len(metrics)})
    return None
