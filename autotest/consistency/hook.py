"""The default-off collection hook a framework imports: MSProbe around one model's forward.

Wire it around the forward of each side (a rollout worker's prefill, a train worker's log-prob
recompute)::

    from autotest.consistency.hook import consistency_forward

    with consistency_forward(model, side="rollout", step=step, requests=[(rid, token_ids), ...]):
        logits = model(input_ids)

With ``RL_AUTOTEST_CONSISTENCY`` unset the call returns a shared no-op context: one environment
lookup, no import of torch or MSProbe, nothing written, the training path untouched. With it set
to a diagnostic config (JSON, schema: :mod:`.config`; ``"train"`` is accepted for ``"actor"``),
forwards of ``window_step`` are dumped with MSProbe (level L0) into the side's ``dump_path`` in
MSProbe's own layout (``step{N}/rank{R}`` or ``step{N}/proc{pid}``; every forward of the step in
one ``dump.json`` as ``forward.K``), and each dumped forward appends one correlation line in the
seed's format (``dispatch_logger`` / ``update_actor``) so ``consistency analyze`` pairs the ranks.

``record_logprobs(kind, step=..., ...)`` saves the per-token log-probs the sampler returned (and
the diagnostic recomputes) beside the dumps, so the analysis can tell a sampling-path divergence
from a module one; same switch, same window.

``install_from_env()`` (for ``sitecustomize``) wraps every outermost ``transformers`` model call
of an unmodified process when the config has ``"auto": {"side": ...}``: the n-th call is step n.

This module imports only the standard library and the light config modules at load time.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ENV = "RL_AUTOTEST_CONSISTENCY"
_NULL = contextlib.nullcontext()
_SIDES = {"rollout": "rollout", "train": "actor", "actor": "actor"}
_state: dict[str, Any] = {}


def consistency_forward(
    model: Any,
    *,
    side: str,
    step: int,
    requests: Sequence[tuple[str, Sequence[int]]] = (),
    weight_version: int | None = None,
    held_weight_version: int | None = None,
) -> contextlib.AbstractContextManager[Any]:
    """A context around exactly one forward of ``model``; a no-op unless ``RL_AUTOTEST_CONSISTENCY`` is set.

    ``weight_version`` is the batch's version; ``held_weight_version`` the version this process holds (its own last
    completed weight load): a rollout holding less than the actor is named a stale sync with the count."""
    path = os.environ.get(ENV)
    if not path:
        return _NULL
    return _collector(path).forward(model, _SIDES[side], step, requests, weight_version, held_weight_version)


class _Collector:
    """One per process: MSProbe's debugger is a process-wide singleton."""

    def __init__(self, config_path: str) -> None:
        from autotest.consistency.config import parse_diagnostic_config
        from autotest.errors import UsageError

        try:
            raw = json.loads(Path(config_path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise UsageError(f"{config_path} (from {ENV}): cannot read the diagnostic config ({exc})") from None
        self.auto = raw.pop("auto", None)
        if "train" in raw:  # the hook's users say train; the analysis says actor
            raw["actor"] = raw.pop("train")
        self.cfg = parse_diagnostic_config(raw, source=config_path)
        self.debugger: Any = None
        self.side: str | None = None
        self.forwards = 0
        self.pending_step: int | None = None

    @contextlib.contextmanager
    def forward(
        self, model: Any, side: str, step: int, requests: Sequence[tuple[str, Sequence[int]]], version: int | None,
        held: int | None = None,
    ) -> Iterator[None]:
        limit = self.cfg.max_forwards_per_side
        if step != self.cfg.window_step or (limit and self.forwards >= limit):
            self._flush()
            yield
            return
        debugger = self._debugger(side)
        if self.pending_step is None:
            debugger.set_init_step(step)  # MSProbe's step is the run's step: its step filter stays real
        autocast: list[str] = []  # as the model's forward begins (the caller may enter autocast inside this)
        watch = model.register_forward_pre_hook(lambda module, args: autocast.append(autocast_state(module)))
        debugger.start(model=model)
        try:
            yield
        finally:
            watch.remove()
            debugger.stop()
            self.pending_step = step
            self.forwards += 1
            self._log(side, step, requests, version, autocast[0] if autocast else None, held)

    def _debugger(self, side: str) -> Any:
        if self.side is not None and side != self.side:
            raise RuntimeError(f"{ENV}: this process already dumps the {self.side} side; one side per process")
        if self.debugger is None:
            from msprobe.pytorch import PrecisionDebugger

            from autotest.consistency.msprobe_config import write_msprobe_configs

            self.side = side
            PrecisionDebugger(config_path=str(write_msprobe_configs(self.cfg)[side]))
            self.debugger = PrecisionDebugger
            atexit.register(self._flush)
        return self.debugger

    def _flush(self) -> None:
        # MSProbe writes dump.json when its step ends: once, after the window's last forward.
        if self.pending_step is not None and self.debugger is not None:
            self.pending_step = None
            self.debugger.step()

    def _log(self, side: str, step: int, requests: Sequence[tuple[str, Sequence[int]]], version: int | None,
             autocast: str | None, held: int | None = None) -> None:
        rank = _rank()
        line: dict[str, Any] = {"source": "dispatch_logger" if side == "rollout" else "update_actor",
                                "pid": os.getpid(), "rank": rank, "step": step}  # fmt: skip
        ids = [str(r) for r, _ in requests]
        tokens = [[int(t) for t in toks] for _, toks in requests]
        if side == "rollout":
            line.update(phase="prefill", requests=[{"request_id": r, "type": "prefill", "tokens": t}
                                                   for r, t in zip(ids, tokens, strict=True)])  # fmt: skip
        else:
            line.update(phase="recompute_logprob", request_ids=ids, token_ids=tokens)
        if version is not None:
            line["weight_version"] = version
        if held is not None:
            line["held_weight_version"] = held
        if autocast is not None:
            line["autocast"] = autocast
        log = self.cfg.side(side).correlation_log
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")


def record_logprobs(
    kind: str,
    *,
    step: int,
    samples: Sequence[int],
    positions: Sequence[Sequence[int]],
    token_ids: Sequence[Sequence[int]],
    logprobs: Sequence[Sequence[float]],
    request_ids: Sequence[str] | None = None,
    dtype: str | None = None,
    position_ids: Sequence[Sequence[int]] | None = None,
    cache_lengths: Sequence[Sequence[int]] | None = None,
) -> None:
    """Save the window's per-token log-probs as one path computed them (``recorded`` by the sampler,
    ``recomputed`` by the rollout model's prefill, ``trainer``) for the three-way comparison; a no-op
    unless ``RL_AUTOTEST_CONSISTENCY`` is set. One file per process and kind (ranks never share a file):
    ``<output_dir>/logprobs/<kind>.<pid>.jsonl`` (format: :mod:`.logprob_records`)."""
    path = os.environ.get(ENV)
    if not path:
        return
    cfg = _collector(path).cfg
    if step != cfg.window_step:
        return
    from autotest.consistency.logprob_records import FOLDER, append_records, record_lines

    lines = record_lines(kind, step, samples, request_ids, positions, token_ids, logprobs, dtype, position_ids,
                         cache_lengths)
    append_records(cfg.output_dir / FOLDER / f"{kind}.{os.getpid()}.jsonl", lines)


def autocast_state(model: Any) -> str:
    """``off`` or the autocast dtype in force for the device ``model``'s parameters are on (the correlation log's
    ``autocast``)."""
    import torch

    device = next(model.parameters()).device.type
    return str(torch.get_autocast_dtype(device)) if torch.is_autocast_enabled(device) else "off"


def _collector(path: str) -> _Collector:
    if _state.get("path") != path:
        _state.update(path=path, collector=_Collector(path))
    return _state["collector"]


def _rank() -> int | None:
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else None


def install_from_env() -> bool:
    """For ``sitecustomize``: with ``"auto": {"side": S}`` in the config, wrap every outermost
    ``transformers`` model call (the n-th call is step n). Returns whether anything was installed."""
    path = os.environ.get(ENV)
    if not path:
        return False
    collector = _collector(path)
    if not collector.auto:
        return False
    import transformers

    side = _SIDES[collector.auto["side"]]
    original = transformers.PreTrainedModel.__call__
    depth = {"calls": 0, "active": 0}

    def call(model: Any, *args: Any, **kwargs: Any) -> Any:
        if depth["active"]:  # an inner model (Qwen3Model inside Qwen3ForCausalLM): one forward already wrapped
            return original(model, *args, **kwargs)
        depth["calls"] += 1
        ids = kwargs.get("input_ids", args[0] if args else None)
        rows = ids.tolist() if hasattr(ids, "tolist") else []
        requests = [(f"auto-f{depth['calls']}-b{i}", row) for i, row in enumerate(rows)]
        depth["active"] += 1
        try:
            with consistency_forward(model, side=side, step=depth["calls"], requests=requests):
                return original(model, *args, **kwargs)
        finally:
            depth["active"] -= 1

    transformers.PreTrainedModel.__call__ = call
    return True
