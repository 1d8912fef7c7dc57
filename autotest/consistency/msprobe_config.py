"""MSProbe config.json files, one per side, and the two-pass plan (statistics, then tensor).

Pass 1 dumps Max/Min/Mean/Norm of every module (``task: statistics``, level L0) in the
diagnostic window; pass 2 dumps full tensors only for the suspects the analysis names
(``task: tensor`` with ``list``), because statistics screen but elementwise conclusions need
tensors. ``data_mode`` is ``forward``: the comparison is of forward passes, and dumping the
backward of the actor would cost memory and add nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autotest.consistency.config import SIDES, DiagnosticConfig
from autotest.errors import UsageError

INSTALL_HINT = "pip install 'rl-autotest[consistency]' (PyPI mindstudio-probe, import msprobe)"


def require_msprobe() -> str:
    """Import msprobe or raise a one-line UsageError naming the extra; returns its version."""
    try:
        import msprobe  # noqa: F401
        from msprobe.pytorch import PrecisionDebugger  # noqa: F401
    except ImportError as exc:
        raise UsageError(
            f"consistency collection needs MSProbe, which failed to import ({exc}): {INSTALL_HINT}"
        ) from None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mindstudio-probe")
    except PackageNotFoundError:
        return "unknown"


def msprobe_config_dict(
    task: str,
    dump_path: Path,
    step: int,
    module_list: Sequence[str] = (),
    scope: Sequence[str] = (),
) -> dict[str, Any]:
    """The config.json content for one side (level L0: keys are module names)."""
    return {
        "task": task,
        "dump_path": str(dump_path),
        "rank": [],
        "step": [step],
        "level": "L0",
        "async_dump": False,
        task: {
            "scope": list(scope),
            "list": list(module_list),
            "data_mode": ["forward"],
            "summary_mode": "statistics",
        },
    }


def write_msprobe_configs(cfg: DiagnosticConfig, overwrite: bool = False) -> dict[str, Path]:
    """Write each side's config.json (unless it exists and ``overwrite`` is False); validate it."""
    paths = {}
    for name in SIDES:
        side = cfg.side(name)
        if overwrite or not side.msprobe_config.exists():
            content = msprobe_config_dict(cfg.task, side.dump_path, cfg.window_step, side.module_list, cfg.scope)
            _write_atomic(side.msprobe_config, json.dumps(content, indent=2) + "\n")
        check_side_config(side.msprobe_config, cfg.window_step)
        paths[name] = side.msprobe_config
    return paths


def _write_atomic(path: Path, text: str) -> None:
    # With Ray the rollout engine and the trainer build their observers concurrently from the
    # same diagnostic config; a reader must never see a half-written file.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def check_side_config(path: Path, window_step: int) -> dict[str, Any]:
    """A user-provided config.json must be usable for module-level pairing in the window."""
    try:
        content = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(content, dict):
        raise UsageError(f"{path}: must be a JSON object")
    if content.get("level") != "L0":
        raise UsageError(
            f"{path}: key 'level': must be 'L0' (module-level keys are what the analysis maps), "
            f"got {content.get('level')!r}"
        )
    if content.get("task") not in ("statistics", "tensor"):
        raise UsageError(f"{path}: key 'task': must be 'statistics' or 'tensor', got {content.get('task')!r}")
    steps = content.get("step") or []
    if steps and window_step not in steps:
        raise UsageError(
            f"{path}: key 'step': {steps} does not include window_step {window_step}; nothing would be dumped"
        )
    if content.get("async_dump"):
        raise UsageError(f"{path}: key 'async_dump': must be false (dumps are read right after each forward)")
    return content


def tensor_pass_config(
    statistics_config: Mapping[str, Any],
    output_dir: Path,
    rollout_modules: Sequence[str],
    actor_modules: Sequence[str],
) -> dict[str, Any]:
    """The diagnostic config of pass 2: same window and batch, ``task: tensor``, ``list``
    narrowed to the given module paths of each side (``model.layers.1.mlp.down_proj``)."""
    if not rollout_modules or not actor_modules:
        raise UsageError("tensor pass: name at least one suspect module per side (the statistics pass found none)")
    raw = {k: v for k, v in statistics_config.items() if k not in ("output_dir", "task", "list", "scope", *SIDES)}
    # A trailing dot makes the substring match the module and its children, not look-alike siblings
    # (layers.1 must not match layers.10).
    raw.update(
        output_dir=str(output_dir),
        task="tensor",
        rollout={"list": [f"{m}." for m in rollout_modules]},
        actor={"list": [f"{m}." for m in actor_modules]},
    )
    return raw
