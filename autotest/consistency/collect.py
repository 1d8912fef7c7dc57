"""The default-off collection hook: one MSProbe dump and one correlation line per forward.

The embedded workload (and a framework integration) calls, only when ``--diagnostic-config``
is given::

    observer = make_observer(config_dict)
    with observer.forward("rollout", step, "prefill", request_ids, token_ids, weight_version, model):
        model(...)                       # exactly one forward pass
    ...
    observer.close()

Two sides, one process, one MSProbe singleton. ``PrecisionDebugger`` is process-wide (a second
construction returns the first), and both sides run in the same process in the embedded
workload. We keep that one debugger and, before each dumped forward, give it the side's config
with a per-forward ``dump_path`` through MSProbe's own runtime-reconfiguration path (the one its
config hot-reload uses: ``_apply_reloaded_config`` → ``service.apply_runtime_config``). Why this
rather than the alternatives:

- a debugger per side is impossible (singleton), and resetting the singleton would leave the
  first debugger's module hooks on the models, firing into a dead service;
- dumping both sides into one folder as alternating MSProbe "steps" and splitting afterwards
  breaks the meaning of MSProbe's ``step`` filter (it would no longer be the training step) and
  cannot honour two different ``list`` narrowings;
- file-based hot reload needs ``dump_enable`` plus an mtime change polled every 0.5 s: racy.

The module hooks are registered once per model by ``start(model=...)`` and survive
reconfiguration (the service keeps them; its hook manager gets the new data collector), so each
side keeps its own names (``Module.model.layers.0...``) and the call index restarts at 0 for
every forward (``step()`` resets MSProbe's per-step counters). ``set_init_step(step)`` before
``start`` makes MSProbe's step the training step, so its ``step: [window]`` filter stays real.

``record_logprobs`` saves the window's per-token log-probs as each path computed them (the ones
the rollout recorded while sampling, its own prefill recompute, the trainer's) into
``<output_dir>/logprobs/<kind>.jsonl`` for the three-way comparison (:mod:`.logprob_compare`).

Each forward lands in ``<side dump_path>/forward_NNNN/step{N}/proc{pid}|rank{R}/``: statistics
of a batch are only comparable with a forward over the same samples, so forwards are kept apart
and paired later from the correlation logs. Outside the window the observer does nothing and
never touches MSProbe (the training path is untouched).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from autotest.consistency.config import (
    LOG_LEVELS,
    MANIFEST,
    SIDES,
    DiagnosticConfig,
    parse_diagnostic_config,
)
from autotest.consistency.correlation import (
    ForwardRecord,
    append_record,
    token_ranges_of,
)
from autotest.consistency.hook import autocast_state
from autotest.consistency.logprob_records import FOLDER as LOGPROB_FOLDER
from autotest.consistency.logprob_records import append_records, record_lines
from autotest.consistency.msprobe_config import require_msprobe, write_msprobe_configs


class ConsistencyObserver:
    """Wraps forwards of the diagnostic window with MSProbe dumps; see the module docstring."""

    def __init__(self, cfg: DiagnosticConfig) -> None:
        self.cfg = cfg
        self.msprobe_version = require_msprobe()  # fail before a long run, not in the window
        self.config_paths = write_msprobe_configs(cfg)
        self._debugger: Any = None
        self._forward_count = {side: 0 for side in SIDES}
        self._active = False
        self._closed = False
        self._manifest: dict[str, Any] = {
            "msprobe_version": self.msprobe_version,
            "pid": os.getpid(),
            "window_step": cfg.window_step,
            "task": cfg.task,
            "sides": {
                s: {
                    "dump_path": str(cfg.side(s).dump_path),
                    "msprobe_config": str(cfg.side(s).msprobe_config),
                    "correlation_log": str(cfg.side(s).correlation_log),
                    "forwards": 0,
                }
                for s in SIDES
            },
            "mechanism": "one PrecisionDebugger, reconfigured per forward (dump_path per side and forward)",
        }
        cfg.output_dir.mkdir(parents=True, exist_ok=True)
        self._write_manifest()

    @contextlib.contextmanager
    def forward(
        self,
        side: str,
        step: int,
        phase: str,
        request_ids: Sequence[str],
        token_ids: Sequence[Sequence[int]],
        weight_version: int,
        model: Any,
        held_weight_version: int | None = None,
    ) -> Iterator[None]:
        """Context manager around exactly one forward pass of ``model`` on ``side``; ``weight_version`` is the
        batch's, ``held_weight_version`` the version the side's model holds (its last completed weight load)."""
        if side not in SIDES:
            raise ValueError(f"side must be one of {SIDES}, got {side!r}")
        if len(request_ids) != len(token_ids):
            raise ValueError(f"{len(request_ids)} request_ids but {len(token_ids)} token_ids lists")
        if self._closed:
            raise RuntimeError("observer is closed")
        limit = self.cfg.max_forwards_per_side
        if step != self.cfg.window_step or (limit and self._forward_count[side] >= limit):
            yield
            return
        if self._active:
            raise RuntimeError("nested observer.forward(): wrap exactly one forward at a time")
        debugger = self._ensure_debugger()
        index = self._forward_count[side]
        self._forward_count[side] += 1
        side_cfg = self.cfg.side(side)
        forward_root = side_cfg.dump_path / f"forward_{index:04d}"
        self._configure(side, forward_root)
        debugger.set_init_step(step)
        self._active = True
        autocast: list[str] = []
        # the autocast state inside the model's forward (a caller may enter autocast inside this context)
        watch = model.register_forward_pre_hook(lambda module, args: autocast.append(autocast_state(module)))
        try:
            debugger.start(model=model)
            try:
                yield
            finally:
                watch.remove()
                debugger.stop()
                dump_json = Path(debugger._get_instance().service.data_collector.dump_file_path or "")
                debugger.step()  # flush and reset MSProbe's per-step call counters
        finally:
            self._active = False
        dump_dir = dump_json.parent if dump_json.name == "dump.json" and dump_json.exists() else forward_root
        record = ForwardRecord(
            side=side,
            pid=os.getpid(),
            rank=_rank(),
            step=step,
            phase=phase,
            forward_index=index,
            weight_version=int(weight_version),
            held_weight_version=None if held_weight_version is None else int(held_weight_version),
            msprobe_step=step,
            task=self.cfg.task,
            dump_path=str(dump_dir),
            dump_subdir=os.path.relpath(dump_dir, side_cfg.dump_path),
            request_ids=tuple(str(r) for r in request_ids),
            token_ids=tuple(tuple(int(t) for t in toks) for toks in token_ids),
            token_ranges=token_ranges_of([list(t) for t in token_ids]),
            log_path=str(side_cfg.correlation_log),
            line=0,
            autocast=autocast[0] if autocast else None,
        )
        append_record(side_cfg.correlation_log, record)
        self._manifest["sides"][side]["forwards"] = self._forward_count[side]
        self._write_manifest()

    def record_logprobs(
        self,
        kind: str,
        step: int,
        samples: Sequence[int],
        request_ids: Sequence[str],
        positions: Sequence[Sequence[int]],
        token_ids: Sequence[Sequence[int]],
        logprobs: Sequence[Sequence[float]],
        dtype: str | None = None,
        position_ids: Sequence[Sequence[int]] | None = None,
        cache_lengths: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """Append per-token log-probs of the window's samples to ``<output_dir>/logprobs/<kind>.jsonl``
        (format: :mod:`.logprob_records`); outside the window nothing is written."""
        if step != self.cfg.window_step:
            return
        lines = record_lines(kind, step, samples, request_ids, positions, token_ids, logprobs, dtype, position_ids,
                             cache_lengths)
        append_records(self.cfg.output_dir / LOGPROB_FOLDER / f"{kind}.jsonl", lines)

    def close(self) -> None:
        """Flush and record what was collected. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._manifest["closed"] = True
        self._write_manifest()

    def _ensure_debugger(self) -> Any:
        # Constructed at the first forward of the window so steps before it run without MSProbe.
        if self._debugger is None:
            from msprobe.pytorch import PrecisionDebugger

            _set_msprobe_log_level(self.cfg.msprobe_log_level)
            PrecisionDebugger(config_path=str(self.config_paths["rollout"]))
            self._debugger = PrecisionDebugger
        return self._debugger

    def _configure(self, side: str, dump_path: Path) -> None:
        from msprobe.pytorch.dump.debugger.debugger_config import DebuggerConfig

        instance = self._debugger._get_instance()
        common, task = instance._parse_config_path(str(self.config_paths[side]), None)
        new_config = DebuggerConfig(common, task, None, str(dump_path), None)
        # MSProbe's own runtime reconfiguration (what its hot reload does); the signature is kept
        # so a later file-based reload check sees no change.
        instance._apply_reloaded_config(common, task, new_config, instance._reload_state["signature"])

    def _write_manifest(self) -> None:
        path = self.cfg.output_dir / MANIFEST.format(pid=os.getpid())
        path.write_text(json.dumps(self._manifest, indent=2) + "\n", encoding="utf-8")


def _rank() -> int | None:
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else None


def _set_msprobe_log_level(level: str | None) -> None:
    if level is None:
        return
    from msprobe.core.common.log import logger as core_logger
    from msprobe.pytorch.common.log import logger as torch_logger

    for log in (core_logger, torch_logger):
        log.level = LOG_LEVELS[level]


def make_observer(config: Mapping[str, Any]) -> ConsistencyObserver:
    """Build the observer from the ``--diagnostic-config`` dict (schema: :mod:`.config`)."""
    return ConsistencyObserver(parse_diagnostic_config(config))
