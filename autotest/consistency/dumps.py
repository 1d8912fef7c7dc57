"""Read one MSProbe L0 dump folder into module entries keyed by module key.

Layout: ``dump_path/step{N}/rank{R}|proc{pid}/dump.json`` (+ ``construct.json``,
``stack.json``, ``dump_tensor_data/*.pt`` for task tensor). Keys look like
``Module.model.layers.0.mlp.down_proj.Linear.forward.0``; each has ``input_args``,
``input_kwargs``, ``output`` and ``parameters``, nested lists/dicts whose tensor leaves carry
dtype, shape, Max, Min, Mean, Norm and (task tensor) ``data_name``.

``dump.json`` lists a module when its forward *finishes*, so children come before their parent:
that completion order is the execution order used to find the first divergence (a parent's
output cannot diverge before the child that produced it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotest.errors import UsageError

KEY_RE = re.compile(r"^(?P<kind>Module|Cell)\.(?P<path>.+)\.(?P<cls>[^.]+)\.(?P<dir>forward|backward)\.(?P<index>\d+)$")
STATS = ("Max", "Min", "Mean", "Norm")
_JSON_KINDS = {"list": "list", "str": "text", "int": "number", "float": "number", "bool": "boolean",
               "NoneType": "null"}


@dataclass(frozen=True)
class TensorStat:
    """One tensor leaf of a module call."""

    path: str
    """Where it sits in the call: ``output.0``, ``input_kwargs.hidden_states``, ``parameters.weight``."""
    component: str
    """``input``, ``output`` or ``parameter``."""
    dtype: str
    shape: tuple[int, ...]
    stats: Mapping[str, float | None]
    """Max, Min, Mean, Norm as dumped (Mean/Norm are None for integer tensors)."""
    data_file: Path | None
    """The ``.pt`` file (task tensor) or None (task statistics)."""
    part: tuple[int, int, int] | None = None
    """(dim, start, length): this stat is that slice of ``data_file`` (one part of a fused output)."""
    shards: tuple[tuple[int, int, int, int, int], ...] = ()
    """A reassembled tensor's slices (rank, dim, start, length, start in the rank's tensor); see :mod:`.reassemble`."""

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class ModuleEntry:
    """One module forward call."""

    key: str
    path: str
    """Module path in the model: ``model.layers.0.mlp.down_proj``."""
    cls: str
    call_index: int
    order: int
    """Position in forward completion order (children before parents)."""
    parent: str | None
    """Key of the enclosing module call (construct.json), if recorded."""
    tensors: tuple[TensorStat, ...]

    def component(self, name: str) -> tuple[TensorStat, ...]:
        return tuple(t for t in self.tensors if t.component == name)


@dataclass(frozen=True)
class Dump:
    """One MSProbe rank/proc folder."""

    root: Path
    task: str
    level: str
    entries: Mapping[str, ModuleEntry]
    """Forward module calls in completion order."""

    def has_tensor_data(self) -> bool:
        return any(t.data_file is not None for e in self.entries.values() for t in e.tensors)


def parse_key(key: str) -> tuple[str, str, str, int] | None:
    """(module path, class, direction, call index) of a module key, or None for API keys."""
    m = KEY_RE.match(key)
    if not m:
        return None
    return m["path"], m["cls"], m["dir"], int(m["index"])


def find_dump_dirs(root: Path) -> list[Path]:
    """Every folder under ``root`` (inclusive) that holds a dump.json, sorted."""
    root = Path(root)
    if (root / "dump.json").is_file():
        return [root]
    return sorted(p.parent for p in root.rglob("dump.json"))


def _leaf(value: dict[str, Any]) -> bool:
    return "dtype" in value and "shape" in value and ("Max" in value or "data_name" in value)


def _walk(value: Any, path: str, component: str, data_dir: Path, out: list[TensorStat], where: str) -> None:
    if isinstance(value, dict):
        if _leaf(value):
            data_name = value.get("data_name")
            out.append(
                TensorStat(
                    path=path,
                    component=component,
                    dtype=str(value["dtype"]),
                    shape=_shape(value["shape"], f"{where}.{path}"),
                    stats={s: _number(value.get(s)) for s in STATS},
                    data_file=(data_dir / _data_name(data_name, f"{where}.{path}")) if data_name else None,
                    shards=_shards(value.get("shards", []), f"{where}.{path}"),
                )
            )
            return
        if "type" in value and "value" in value:
            return  # a non-tensor argument (bool, int, slice); not compared
        for name, item in value.items():
            _walk(item, f"{path}.{name}", component, data_dir, out, where)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _walk(item, f"{path}.{i}", component, data_dir, out, where)


class _BadLeaf(Exception):
    """A tensor leaf dump.json describes impossibly; read_dump names the file."""


def _shape(value: Any, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(type(d) is int and d >= 0 for d in value):
        raise _BadLeaf(f"{where}: shape {json.dumps(value)[:60]} is not a list of sizes >= 0")
    return tuple(value)


def _shards(value: Any, where: str) -> tuple[tuple[int, int, int, int, int], ...]:
    if not isinstance(value, list) or not all(isinstance(s, list) and len(s) == 5 and all(type(v) is int for v in s)
                                              for s in value):
        raise _BadLeaf(f"{where}: shards {json.dumps(value)[:60]} is not a list of [rank, dim, start, length, local]")
    return tuple(tuple(s) for s in value)  # type: ignore[misc]


def _data_name(value: Any, where: str) -> str:
    # a tensor file sits in dump_tensor_data/ beside dump.json: a name, never a path out of it
    if not isinstance(value, str) or "/" in value or "\\" in value or value in (".", ".."):
        raise _BadLeaf(f"{where}: data_name {json.dumps(value)[:60]} is not a file name in dump_tensor_data/")
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None if value is None else float(value)
    if isinstance(value, (int, float)):
        return float(value)
    return None


def read_dump(path: Path) -> Dump:
    """Read the single dump folder at or under ``path``; UsageError if none or several."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: dump folder does not exist")
    dirs = find_dump_dirs(path)
    if not dirs:
        raise UsageError(f"{path}: no dump.json under this folder (did MSProbe dump the window step?)")
    if len(dirs) > 1:
        raise UsageError(f"{path}: {len(dirs)} dump.json folders under it; pass one of them, e.g. {dirs[0]}")
    root = dirs[0]
    file = root / "dump.json"
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{file}: line {exc.lineno}: not valid JSON (truncated dump?)") from None
    except UnicodeDecodeError:
        raise UsageError(f"{file}: not UTF-8 text (a corrupt or foreign file); re-collect the dump") from None
    except OSError as exc:
        raise UsageError(f"{file}: cannot read the dump ({exc.strerror})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("data", {}), dict):
        kind = type(doc.get("data") if isinstance(doc, dict) else doc).__name__
        what = "its 'data'" if isinstance(doc, dict) else "the dump"
        raise UsageError(f"{file}: {what} is a JSON {_JSON_KINDS.get(kind, kind)}, not an object of module "
                         "calls; is this an MSProbe dump.json?")
    parents: Any = {}
    construct = root / "construct.json"
    if construct.is_file():
        try:
            parents = json.loads(construct.read_text(encoding="utf-8"))
        except (ValueError, OSError):
            parents = {}  # the tree only refines ordering notes; the dump itself is intact
        if not isinstance(parents, dict):
            parents = {}
    # The tensor folder is found next to dump.json so a moved results folder still resolves.
    data_dir = root / "dump_tensor_data"
    entries: dict[str, ModuleEntry] = {}
    for key, body in (doc.get("data") or {}).items():
        parsed = parse_key(key)
        if parsed is None or parsed[2] != "forward" or not isinstance(body, dict):
            continue
        module_path, cls, _, index = parsed
        tensors: list[TensorStat] = []
        try:
            _walk(body.get("input_args", []), "input_args", "input", data_dir, tensors, f"data.{key}")
            _walk(body.get("input_kwargs", {}), "input_kwargs", "input", data_dir, tensors, f"data.{key}")
            _walk(body.get("output", []), "output", "output", data_dir, tensors, f"data.{key}")
            _walk(body.get("parameters", {}), "parameters", "parameter", data_dir, tensors, f"data.{key}")
        except _BadLeaf as exc:
            raise UsageError(f"{file}: {exc}; the dump is corrupt, re-collect it") from None
        parent = parents.get(key)
        entries[key] = ModuleEntry(
            key=key,
            path=module_path,
            cls=cls,
            call_index=index,
            order=len(entries),
            parent=parent if isinstance(parent, str) else None,
            tensors=tuple(tensors),
        )
    return Dump(root=root, task=str(doc.get("task", "")), level=str(doc.get("level", "")), entries=entries)


def load_tensor(stat: TensorStat) -> Any:
    """The dumped tensor as float64 (task tensor only)."""
    import torch

    if stat.data_file is None:
        raise ValueError(f"{stat.path}: no tensor data (task statistics)")
    file = stat.data_file
    named = f"{file.parent.parent / 'dump.json'} names it for {stat.path}"
    if not file.is_file():
        raise UsageError(f"{file}: tensor file missing ({named}); re-collect the tensor pass or pass "
                         "--statistics-only")
    try:
        tensor = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - a corrupt file surfaces as pickle, zip, EOF or runtime errors
        detail = " ".join(str(exc).split())[:120]
        raise UsageError(f"{file}: not a loadable tensor file ({type(exc).__name__}: {detail}); "
                         "re-collect the tensor pass or pass --statistics-only") from None
    if not isinstance(tensor, torch.Tensor):
        raise UsageError(f"{file}: holds a {type(tensor).__name__}, not a tensor ({named})")
    # a projection inside a fused group (output.0[q_proj]) names the part's shape; the file holds the whole
    shape_differs = stat.part is None and tuple(tensor.shape) != stat.shape
    if shape_differs or str(tensor.dtype) != stat.dtype:
        raise UsageError(f"{file}: holds a {str(tensor.dtype)} tensor of shape {list(tensor.shape)}, but "
                         f"{named} as {stat.dtype} {list(stat.shape)}; the dump is inconsistent, re-collect it")
    tensor = tensor.detach().to(torch.float64)
    if stat.part is not None:
        dim, start, length = stat.part
        tensor = tensor.narrow(dim, start, length)
    return tensor
