"""The consistency job's side of attached collection: the run's environment, and what the run attached.

A case without ``consistency.diagnostic_args`` (xtuner, verl, slime: their launch scripts take no
diagnostic option, and extra arguments would land in a positional one) is re-run with two variables and
no extra argument: ``RL_AUTOTEST_COLLECT`` (the diagnostic config) and ``PYTHONPATH`` with the folder
holding :mod:`autotest.attach.rl_autotest_collect` and its ``sitecustomize`` first. Each
process of the run records what it attached in ``<output_dir>/attach/<pid>.jsonl``; a point the
installed framework does not have becomes one line: ``not collected: lmdeploy 0.18.0 has no <point>``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autotest.attach import ATTACH_DIR
from autotest.attach.rl_autotest_collect import ENV, POINTS, STATUS_FOLDER

SIDE_NAMES = {"actor": "actor (training-side log-prob recompute)", "rollout": "rollout (inference engine forward)"}


def attach_env(config_path: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """The two variables a run needs for attached collection (its own PYTHONPATH kept behind ours)."""
    rest = environ.get("PYTHONPATH", "")
    return {ENV: str(config_path), "PYTHONPATH": os.pathsep.join(p for p in (str(ATTACH_DIR), rest) if p)}


def read_status(output_dir: Path) -> list[dict[str, Any]]:
    """Every line the run's processes wrote about their attach points (unreadable lines are skipped)."""
    lines: list[dict[str, Any]] = []
    folder = Path(output_dir) / STATUS_FOLDER
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        for text in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                line = json.loads(text)
            except json.JSONDecodeError:
                continue
            if isinstance(line, dict):
                lines.append(line)
    return lines


def missing_lines(status: list[dict[str, Any]]) -> list[str]:
    """``not collected: <package> <version> has no <point>``, once per missing point; a point that could not
    collect (MSProbe absent from the node's Python, say) once with its reason."""
    seen: dict[str, str] = {}
    for line in status:
        if line.get("status") == "error":
            seen.setdefault(str(line.get("what")), f"not collected: {line.get('what')} attached but could not "
                                                   f"collect: {line.get('detail')}")
        if line.get("status") == "missing":
            version = f" {line['version']}" if line.get("version") else " (version unknown)"
            seen.setdefault(str(line.get("what")), f"not collected: {line.get('package')}{version} has no "
                                                   f"{line.get('what')}")
    return list(seen.values())


def side_lines(status: list[dict[str, Any]], dumped: Mapping[str, bool]) -> list[str]:
    """For a side with no dump and no missing point: which points were looked for, and what attached."""
    out = []
    for side, has_dump in dumped.items():
        mine = [s for s in status if _side(s) == side]
        if has_dump or any(s.get("status") == "missing" for s in mine):
            continue  # collected, or already one line naming the missing point
        attached = sorted({str(s["what"]) for s in mine if s.get("status") == "attached"})
        absent = sorted({str(s["what"]) for s in mine if s.get("status") == "absent"})
        looked = ", ".join(p.forward.name for p in POINTS if p.side == side)
        forwards = {p.forward.name for p in POINTS}
        updates_attached = [w for w in attached if w not in forwards]
        hint = f" (no weight update counted: absent {', '.join(absent)})" if absent and not updates_attached else ""
        why = (f"{', '.join(attached)} attached but ran no forward in the window{hint}" if attached
               else f"no {side} attach point was imported by the run (looked for {looked})")
        out.append(f"not collected: {SIDE_NAMES[side]}: {why}")
    return out


def _side(line: dict[str, Any]) -> str | None:
    point = next((p for p in POINTS if p.name == line.get("point")), None)
    return point.side if point else None


def points_table() -> str:
    """The attach points as a Markdown table (docs/consistency.md embeds it; a test keeps them equal)."""
    rows = ["| point | side | forward (wrapped) | model | weight update (version + 1) | verified at |",
            "| --- | --- | --- | --- | --- | --- |"]
    for p in POINTS:
        updates = "<br>".join(f"`{u.name}`" + (f" when `{u.done_when}`" if u.done_when else "")
                              for u in p.weight_updates)
        rows.append(f"| {p.name} | {p.side} | `{p.forward.name}` | `self.{p.model}` | {updates} | `{p.verified}` |")
    return "\n".join(rows)
