"""What a results folder says about the run that made it, before the history records it: why it was made (its
kind) and what it cost. The history's schema migrations read these for runs recorded before a column existed, so this
module depends on nothing else of the history."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from autotest.errors import UsageError

#: a gating run (the default); the other kinds a run may have are in :data:`RUN_KINDS`
GATE = "gate"
#: why a run was made; only ``TRUSTED_KINDS`` feed calibrate --from-history, drift and the dashboard's bands
#: (``tier``: a shorter run, ``--tier``; ``ab``: a run of an A/B or of its A/A pairs: neither is ever trusted)
RUN_KINDS = (GATE, "calibration", "fault", "dry-run", "bisect", "tier", "ab")
TRUSTED_KINDS = (GATE, "calibration")


def finite_or_none(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None  # results.json writes NaN/inf as strings: not a usable statistic
    return float(value) if math.isfinite(value) else None


def load_results_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from None
    except ValueError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc}); the results folder is corrupt") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


def run_kind(data: dict[str, Any], path: Path) -> str:
    """Why the run was made: ``context.kind`` when recorded, else ``fault`` for a run with a fault, else gate."""
    context = data.get("context") if isinstance(data.get("context"), dict) else {}
    kind = context.get("kind")
    if kind is not None:
        if kind not in RUN_KINDS:
            raise UsageError(f"{path}: key 'context.kind' is {kind!r}; expected one of {', '.join(RUN_KINDS)}")
        return kind
    if context.get("fault"):
        return "fault"
    return "dry-run" if context.get("dry_run") else GATE


def device_seconds(data: dict[str, Any], path: Path) -> float | None:
    """``context.cost.device_seconds``; a value that is not a number is one line."""
    context = data.get("context") if isinstance(data.get("context"), dict) else {}
    cost = context.get("cost")
    if cost is None:
        return None
    value = cost.get("device_seconds") if isinstance(cost, dict) else cost
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{path}: key 'context.cost.device_seconds' is {value!r}, not a number; "
                         "fix or remove the key")
    return finite_or_none(value)


def device_seconds_of_folder(folder: Path) -> float | None:
    """The cost of an already recorded run from its results.json (None when it is gone or has none)."""
    try:
        data = load_results_json(folder / "results.json")
        return device_seconds(data, folder / "results.json") if isinstance(data, dict) else None
    except (UsageError, OSError):
        return None


def cost_basis(data: dict[str, Any], path: Path) -> str | None:
    """``context.cost.basis`` (gpu-seconds, cpu-seconds, core-seconds); text or absent, else one line."""
    context = data.get("context") if isinstance(data.get("context"), dict) else {}
    cost = context.get("cost")
    value = cost.get("basis") if isinstance(cost, dict) else None
    if value is not None and (not isinstance(value, str) or len(value) > 64):
        raise UsageError(f"{path}: key 'context.cost.basis' is {value!r}, not a short text; fix or remove the key")
    return value


def cost_and_mdes_of_folder(folder: Path) -> tuple[str | None, dict[str, float]]:
    """An already recorded run's cost basis and its gates' MDEs from its results.json (none when it is gone)."""
    try:
        data = load_results_json(folder / "results.json")
        basis = cost_basis(data, folder / "results.json")
    except (UsageError, OSError):
        return None, {}
    results = data.get("results") if isinstance(data.get("results"), list) else []
    mdes = {str(r["check_id"]): finite_or_none(r.get("mde")) for r in results
            if isinstance(r, dict) and isinstance(r.get("check_id"), str)}
    return basis, {k: v for k, v in mdes.items() if v is not None}


def kind_of_folder(folder: Path) -> str:
    """The kind of an already recorded run from its results.json (gate when it is gone or unreadable)."""
    try:
        data = json.loads((folder / "results.json").read_bytes())
        return run_kind(data, folder / "results.json") if isinstance(data, dict) else GATE
    except (OSError, ValueError):
        return GATE
