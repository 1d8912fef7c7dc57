"""What is uploaded: the results folder made fit to leave the runner, once the run has ended.

The run's WORK_DIR sits inside the results folder (``work/``), and CI uploads the folder whole. xtuner writes
there ``<exp>/logs/env.json`` (its whole ``os.environ``: tokens included), the Ray session folder (sockets and
logs, gigabytes on a long run) and one trajectory file per step (``<exp>/train_rollout/train_rollout_<N>.jsonl``,
``eval_rollout/…``). :func:`finalise_uploads` therefore, over the whole folder (attempts, resume phase included):

- redacts every ``env.json`` like every other record the harness writes (values under secret names, token shapes,
  known secret values; :mod:`autotest.redaction`) and masks the secret values it held wherever else they appear;
- leaves out sockets (nothing can upload one) and links inside a Ray session, and a Ray session's logs beyond
  ``UploadBudget.ray_logs_bytes`` (the smallest kept first, so most files of most processes stay);
- keeps the first and last ``UploadBudget.trajectory_steps`` trajectory files of each trajectory folder.

Every file left out is one :class:`LeftOut` with its size and why; results.json (``context.left_out``) and
report.md list them. Trackers, training logs and configs are never touched: the judge read them already, and a
reader of the report needs them.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from autotest.errors import WriteFailed
from autotest.files import write_atomic
from autotest.redaction import collect_secrets, mask_file, redact, register_secret, secret_shapes


@dataclass(frozen=True)
class UploadBudget:
    """How much of what a run leaves behind is uploaded; declared once, here (docs/results.md)."""

    #: per-step trajectory files kept per trajectory folder: this many first steps and this many last steps
    trajectory_steps: int = 3
    #: bytes of one Ray session folder's logs kept, smallest files first
    ray_logs_bytes: int = 32 * 2**20


BUDGET = UploadBudget()
#: xtuner's environment dump (``<exp>/logs/env.json``)
ENVIRONMENT_DUMPS = ("env.json",)
#: xtuner's per-step trajectories: ``train_rollout_<step>.jsonl``, ``eval_rollout_<step>.jsonl``
TRAJECTORY = re.compile(r"^(?P<kind>[a-z]+_rollout)_(?P<step>\d+)\.jsonl$")
#: Ray's session folders: ``session_<date>_<time>_<pid>`` in its temp dir (``ray start --temp-dir``)
RAY_SESSION = re.compile(r"^session_\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2}_\d+$")
#: text files masked by value once an env.json named more secrets (binary event files are left alone)
TEXT_SUFFIXES = (".log", ".txt", ".json", ".jsonl", ".out", ".err", ".yaml", ".py", ".sh")


@dataclass(frozen=True)
class LeftOut:
    """One file not uploaded: its path inside the results folder, its size, and why."""

    path: str
    bytes: int
    why: str


@dataclass(frozen=True)
class Finalised:
    """What :func:`finalise_uploads` did to a results folder."""

    left_out: tuple[LeftOut, ...] = ()
    #: environment dumps redacted (paths inside the results folder)
    redacted: tuple[str, ...] = ()
    #: one line per file that could not be made safe; it was removed instead
    problems: tuple[str, ...] = ()
    budget: dict[str, int] = field(default_factory=lambda: asdict(BUDGET))

    def to_dict(self) -> dict[str, Any]:
        return {"left_out": [asdict(x) for x in self.left_out], "redacted": list(self.redacted),
                "problems": list(self.problems), "budget": self.budget}

    @property
    def empty(self) -> bool:
        return not (self.left_out or self.redacted or self.problems)


def finalise_uploads(results_dir: Path, budget: UploadBudget = BUDGET) -> Finalised:
    """Make ``results_dir`` fit to upload (see the module docstring); safe to run on any folder, any ending."""
    root = Path(results_dir)
    left: list[LeftOut] = []
    for session in _ray_sessions(root):
        left += _trim_ray_session(root, session, budget.ray_logs_bytes)
    left += [_remove(root, p, "a socket: it cannot be uploaded") for p in _walk(root) if _is_special(p)]
    left += _cap_trajectories(root, budget.trajectory_steps)
    redacted, problems = _redact_environment_dumps(root)
    return Finalised(tuple(left), tuple(redacted), tuple(problems), asdict(budget))


def _walk(root: Path) -> list[Path]:
    """Every entry below ``root`` (links not followed)."""
    found = []
    for folder, dirs, files in os.walk(root):
        found += [Path(folder) / name for name in (*dirs, *files)]
    return found


def _is_special(path: Path) -> bool:
    try:
        mode = path.lstat().st_mode
    except OSError:
        return False
    return stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode)


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def _remove(root: Path, path: Path, why: str) -> LeftOut:
    size = _size(path)
    path.unlink(missing_ok=True)
    return LeftOut(str(path.relative_to(root)), size, why)


def _ray_sessions(root: Path) -> list[Path]:
    """Ray session folders (``session_<date>_<time>_<pid>`` holding ``logs/`` or ``sockets/``) below ``root``."""
    return sorted(p for p in _walk(root) if RAY_SESSION.match(p.name) and not p.is_symlink() and p.is_dir()
                  and ((p / "logs").is_dir() or (p / "sockets").is_dir()))


def _trim_ray_session(root: Path, session: Path, budget_bytes: int) -> list[LeftOut]:
    """A Ray session's links and sockets, and its logs past the budget (smallest kept first)."""
    left = [_remove(root, p, "a link inside a Ray session (it points at files uploaded once already)")
            for p in _walk(session.parent) if p.is_symlink() and p.parent in (session, session.parent)]
    logs = sorted((p for p in _walk(session / "logs") if p.is_file() and not p.is_symlink()),
                  key=lambda p: (_size(p), str(p)))
    kept = 0
    for log in logs:
        size = _size(log)
        if kept + size <= budget_bytes:
            kept += size
            continue
        left.append(_remove(root, log, f"a Ray session log past the {_amount(budget_bytes)} budget of its "
                                       "session (smallest kept first)"))
    return left


def _amount(size: int) -> str:
    return f"{size / 2**20:g} MiB" if size >= 2**20 else f"{size} bytes"


def _cap_trajectories(root: Path, steps: int) -> list[LeftOut]:
    """Per folder and kind, the trajectory files of the first and last ``steps`` steps are kept."""
    groups: dict[tuple[Path, str], list[tuple[int, Path]]] = {}
    for path in _walk(root):
        match = TRAJECTORY.match(path.name)
        if match and path.is_file() and not path.is_symlink():
            groups.setdefault((path.parent, match["kind"]), []).append((int(match["step"]), path))
    left = []
    for (_, kind), files in sorted(groups.items()):
        files.sort()
        if len(files) <= 2 * steps:
            continue
        first, last = files[steps - 1][0] if steps else None, files[-steps][0] if steps else None
        kept = f"steps up to {first} and from {last} kept" if steps else "none kept"
        for _, path in files[steps:len(files) - steps]:
            left.append(_remove(root, path, f"a per-step {kind} trajectory: {len(files)} steps written, the first "
                                            f"and last {steps} uploaded ({kept})"))
    return left


def _redact_environment_dumps(root: Path) -> tuple[list[str], list[str]]:
    """Each env.json redacted in place; the secret values it held masked in every text file of the folder."""
    dumps = [p for p in _walk(root) if p.name in ENVIRONMENT_DUMPS and p.is_file() and not p.is_symlink()]
    redacted, problems = [], []
    for dump in dumps:
        rel = str(dump.relative_to(root))
        try:
            text = dump.read_text(encoding="utf-8", errors="replace")
            try:
                environ = json.loads(text)
            except ValueError:
                environ = None  # half-written: the text is redacted as it stands
            if isinstance(environ, dict):
                plain = {str(k): str(v) for k, v in environ.items() if isinstance(v, (str, int, float))}
                collect_secrets(plain)  # secret-named and declared names: masked wherever they appear from now on
                for shape in (s for value in plain.values() for s in secret_shapes(value)):
                    register_secret(shape)
                write_atomic(dump, json.dumps(redact(environ), indent=2) + "\n")
            else:
                write_atomic(dump, redact(text))
            redacted.append(rel)
        except (OSError, WriteFailed) as exc:
            dump.unlink(missing_ok=True)
            problems.append(f"{rel}: could not be redacted ({exc}); removed rather than uploaded with its secrets")
    if dumps:
        for path in _walk(root):
            if path.suffix in TEXT_SUFFIXES and path.is_file() and not path.is_symlink():
                try:
                    mask_file(path)
                except WriteFailed as exc:
                    path.unlink(missing_ok=True)
                    problems.append(f"{path.relative_to(root)}: secret values could not be masked ({exc}); removed")
    return redacted, problems
