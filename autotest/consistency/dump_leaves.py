"""One ``dump.json`` tensor leaf as MSProbe writes it (dtype, shape, Max/Min/Mean/Norm, ``data_name``), plus the
``shards`` a reassembled tensor records (:mod:`.reassemble`), and where a leaf sits in a module call's nested body."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from autotest.consistency.dumps import TensorStat


def leaf(stat: TensorStat, stats: Mapping[str, float | None], shape: tuple[int, ...], data_name: str | None,
          segments: list[tuple[int, int, int, int, int]]) -> dict[str, Any]:
    leaf: dict[str, Any] = {"type": "torch.Tensor", "dtype": stat.dtype, "shape": list(shape), **stats}
    if data_name:
        leaf["data_name"] = data_name
    if segments:
        leaf["shards"] = [list(s) for s in segments]
    return leaf


def stats_of(tensor: Any) -> dict[str, float | None]:
    if tensor.numel() == 0:
        return {"Max": None, "Min": None, "Mean": None, "Norm": None}
    floating = tensor.is_floating_point()
    t = tensor.double() if floating else tensor
    return {"Max": float(t.max()), "Min": float(t.min()), "Mean": float(t.mean()) if floating else None,
            "Norm": float(t.norm()) if floating else None}


def combined_stats(shards: Sequence[TensorStat]) -> dict[str, float | None]:
    """The statistics of the concatenation of ``shards`` from theirs alone: max, min, element-weighted mean, root
    sum of squared norms (None where a shard has none)."""
    numel = [s.numel for s in shards]
    total = sum(numel) or 1

    def each(name: str) -> list[float] | None:
        values = [s.stats.get(name) for s in shards]
        return None if any(v is None for v in values) else values  # type: ignore[return-value]

    maxes, mins, means, norms = each("Max"), each("Min"), each("Mean"), each("Norm")
    return {"Max": max(maxes) if maxes else None, "Min": min(mins) if mins else None,
            "Mean": sum(m * n for m, n in zip(means, numel)) / total if means else None,
            "Norm": math.sqrt(sum(v * v for v in norms)) if norms else None}


def put(body: dict[str, Any], path: str, leaf: dict[str, Any]) -> None:
    """Place ``leaf`` at dotted ``path`` (``output.0``, ``parameters.weight``) in MSProbe's nested layout."""
    parts = path.split(".")
    node: Any = body
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        nxt_is_index = not last and parts[i + 1].isdigit()
        if isinstance(node, list):
            index = int(part)
            while len(node) <= index:
                node.append(None)
            if last:
                node[index] = leaf
            else:
                if node[index] is None:
                    node[index] = [] if nxt_is_index else {}
                node = node[index]
        else:
            if last:
                node[part] = leaf
            else:
                node = node.setdefault(part, [] if nxt_is_index else {})
