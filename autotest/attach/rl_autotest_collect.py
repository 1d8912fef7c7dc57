"""Consistency collection that attaches to an unmodified RL framework (stdlib-only until it collects).

The consistency job puts this folder (this module and a ``sitecustomize.py``) first on the run's
``PYTHONPATH`` and sets ``RL_AUTOTEST_COLLECT`` to a diagnostic config (JSON, the schema of
``autotest.consistency.config``). Environment set before ``ray start`` reaches Ray workers, and a
subprocess (an ``api_server`` started by a Ray actor) inherits it, so every Python of the run loads it.
Unset, nothing is imported and nothing is patched. Set, an import hook waits for the modules of the
:data:`POINTS` table and, when one is imported, wraps its method:

- the **forward point** (the actor's log-prob recompute, the rollout engine's model forward): during the
  call MSProbe (``PrecisionDebugger``, level L0 on the model the point holds) dumps every forward of that
  model in MSProbe's own layout (``<dump_path>/step{N}/rank{R}|proc{pid}/dump.json``, one ``forward.K``
  per model call), and each model call appends one correlation line keyed by request id;
- the **weight-update points**: each completed update bumps this process's weight version, so every
  line records the version the side actually holds (weight syncs it took part in) as ``held_weight_version``.
  A forward point sees no batch label, so ``weight_version`` (the batch's) is the same count: the step keys
  the batch, and a side that missed a sync dumps another step (pairing then reports unpaired samples, not a
  stale sync with its count; that needs a framework that logs the batch's version).

The step of a forward is ``weight version + 1`` on both sides (weights of the N-th sync run step N+1),
so the dumped window is the same computation on both sides whatever each framework calls its steps.
A request id is ``tok-`` and a hash of the request's token ids: the same sample fed the same tokens gets the
same id on both sides (the engines' own request ids are not visible at their model-runner forward).

What this process attached, and any point it could not find (``<package> <version> has no <point>``),
is written to ``<output_dir>/attach/<pid>.jsonl``; the job turns a missing point into one line.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.abc
import importlib.metadata
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any

ENV = "RL_AUTOTEST_COLLECT"
STATUS_FOLDER = "attach"
SOURCES = {"rollout": "dispatch_logger", "actor": "update_actor"}


@dataclass(frozen=True)
class Method:
    """``module`` + ``qualname`` (``Class.method``); ``done_when`` names a call argument's attribute that
    must be true for a weight update to count (lmdeploy's ``request.finished``: updates come in buckets)."""

    module: str
    qualname: str
    done_when: str = ""

    @property
    def name(self) -> str:
        return f"{self.module}.{self.qualname}"


@dataclass(frozen=True)
class AttachPoint:
    name: str
    framework: str
    """The distribution whose version a "not collected" line names."""
    side: str
    """``actor`` (training-side log-prob recompute) or ``rollout`` (inference engine forward)."""
    forward: Method
    model: str
    """Attribute path from ``self`` of the forward point to the model MSProbe wraps."""
    weight_updates: tuple[Method, ...]
    verified: str
    """Where the point was read: ``owner/repo@<40-hex sha>`` or a pinned release ``package==version``."""
    notes: str = field(default="", compare=False)


POINTS: tuple[AttachPoint, ...] = (
    AttachPoint(
        "xtuner-actor", "xtuner", "actor",
        Method("xtuner.v1.rl.trainer.worker", "TrainingWorker.compute_actor_logprobs"), "_engine.model",
        (Method("xtuner.v1.rl.trainer.worker", "TrainingWorker.weight_update"),),
        "InternLM/xtuner@b934f462095c1e750229de35367c50ae36caa786",
        notes="old log-prob recompute of fit(); each seq_ctx runs TrainEngine.forward_only on _engine.model"),
    AttachPoint(
        "verl-actor", "verl", "actor",
        Method("verl.workers.actor.dp_actor", "DataParallelPPOActor.compute_log_prob"), "actor_module",
        (Method("verl.workers.fsdp_workers", "ActorRolloutRefWorker.rollout_mode"),),
        "volcengine/verl@b178a3cd56f58b2d502255daba591e92833930a7",
        notes="rollout_mode (async) syncs the actor's weights into the colocated rollout"),
    AttachPoint(
        "slime-actor", "slime", "actor",
        Method("slime.backends.megatron_utils.actor", "MegatronTrainRayActor.compute_log_prob"), "model",
        (Method("slime.backends.megatron_utils.actor", "MegatronTrainRayActor.update_weights"),),
        "THUDM/slime@624b824a898ab0ec1fcb4d373004c7f3852bf515",
        notes="model is the list of virtual-pipeline stages; MSProbe wraps each"),
    AttachPoint(
        "lmdeploy-rollout", "lmdeploy", "rollout",
        Method("lmdeploy.pytorch.engine.model_agent.agent", "BaseModelAgent._forward_impl"), "patched_model",
        (Method("lmdeploy.pytorch.engine.model_agent.agent", "BaseModelAgent.update_params", "request.finished"),
         Method("lmdeploy.pytorch.engine.model_agent.agent", "BaseModelAgent.update_weights_from_distributed")),
        "lmdeploy==0.18.0"),
    AttachPoint(
        "vllm-rollout", "vllm", "rollout",
        Method("vllm.v1.worker.gpu.model_runner", "GPUModelRunner.execute_model"), "model",
        (Method("vllm.v1.worker.gpu.model_runner", "GPUModelRunner.reload_weights"),),
        "vllm==0.34.0"),
    AttachPoint(
        "sglang-rollout", "sglang", "rollout",
        Method("sglang.srt.model_executor.model_runner", "ModelRunner.forward"), "model",
        (Method("sglang.srt.model_executor.model_runner_components.weight_updater",
                "WeightUpdater.update_weights_from_tensor"),
         Method("sglang.srt.model_executor.model_runner_components.weight_updater",
                "WeightUpdater.update_weights_from_disk")),
        "sglang==0.5.23"),
)


def _config_paths(raw: dict[str, Any], side: str) -> dict[str, str]:
    """The side's paths as ``autotest.consistency.config`` resolves them (same defaults)."""
    out = raw["output_dir"]
    block = raw.get(side, {})
    return {key: os.path.join(out, block.get(key, f"{side}/{default}"))
            for key, default in (("dump_path", "dump"), ("msprobe_config", "msprobe_config.json"),
                                 ("correlation_log", "correlation.jsonl"))}


class _State:
    """One per process: MSProbe's debugger is a process-wide singleton, so one side per process."""

    def __init__(self, raw: dict[str, Any], points: tuple[AttachPoint, ...]) -> None:
        self.raw = raw
        self.points = points
        self.window_step = int(raw["window_step"])
        self.max_forwards = int(raw.get("max_forwards_per_side", 0))
        self.version = 0
        self.forwards = 0
        self.side: str | None = None
        self.debugger: Any = None
        self.pending_step: int | None = None
        self.active = 0
        self.failed = False
        self.status_path = os.path.join(raw["output_dir"], STATUS_FOLDER, f"{os.getpid()}.jsonl")

    def status(self, **line: Any) -> None:
        os.makedirs(os.path.dirname(self.status_path), exist_ok=True)
        with open(self.status_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"pid": os.getpid(), **line}) + "\n")

    def debugger_for(self, side: str) -> Any:
        if self.side is not None and side != self.side:
            raise RuntimeError(f"{ENV}: this process already dumps the {self.side} side; one side per process")
        if self.debugger is None:
            from msprobe.pytorch import PrecisionDebugger

            self.side = side
            config = _config_paths(self.raw, side)["msprobe_config"]
            if not os.path.isfile(config):
                raise RuntimeError(f"{ENV}: {config}: the side's MSProbe config is missing (the job writes it)")
            PrecisionDebugger(config_path=config)
            self.debugger = PrecisionDebugger
            atexit.register(self.flush)
        return self.debugger

    def flush(self) -> None:
        # MSProbe writes dump.json when its step ends: once, after the window's last forward
        if self.pending_step is not None and self.debugger is not None:
            self.pending_step = None
            self.debugger.step()


_state: dict[str, _State] = {}


def _attr(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj


def _tokens(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[list[int]]:
    """The token ids of a model call, one list per request (row): ``input_ids=``, ``seq_ctx.input_ids``
    (xtuner) or the first positional argument."""
    ids = kwargs.get("input_ids")
    if ids is None and "seq_ctx" in kwargs:
        ids = getattr(kwargs["seq_ctx"], "input_ids", None)
    if ids is None and args:
        ids = getattr(args[0], "input_ids", args[0])
    if not hasattr(ids, "tolist"):
        return []
    rows = ids.tolist()
    return [rows] if rows and not isinstance(rows[0], list) else rows


def _request_id(tokens: list[int]) -> str:
    return "tok-" + hashlib.sha1(json.dumps(tokens).encode()).hexdigest()[:16]


def _rank() -> int | None:
    dist = sys.modules.get("torch.distributed")
    return dist.get_rank() if dist is not None and dist.is_available() and dist.is_initialized() else None


def _log_forward(state: _State, point: AttachPoint, step: int, args: tuple[Any, ...], kwargs: dict[str, Any],
                 autocast: str) -> None:
    tokens = _tokens(args, kwargs)
    ids = [_request_id(t) for t in tokens]
    line: dict[str, Any] = {"source": SOURCES[point.side], "pid": os.getpid(), "rank": _rank(), "step": step,
                            "weight_version": state.version, "held_weight_version": state.version,
                            "autocast": autocast, "attach_point": point.name}
    if point.side == "rollout":
        line.update(phase="prefill", requests=[{"request_id": r, "type": "prefill", "tokens": t}
                                               for r, t in zip(ids, tokens)])
    else:
        line.update(phase="recompute_logprob", request_ids=ids, token_ids=tokens)
    log = _config_paths(state.raw, point.side)["correlation_log"]
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


def _models(model: Any) -> list[Any]:
    return list(model) if isinstance(model, (list, tuple)) else [model]


def _wrap_forward(point: AttachPoint, original: Any) -> Any:
    import functools

    @functools.wraps(original)
    def collected(self: Any, *args: Any, **kwargs: Any) -> Any:
        state = _state.get("current")
        step = state.version + 1 if state else -1
        if state is None or state.active or state.failed or step != state.window_step or (
                state.max_forwards and state.forwards >= state.max_forwards):
            return original(self, *args, **kwargs)
        try:
            import torch

            models = _models(_attr(self, point.model))
            debugger = state.debugger_for(point.side)
            if state.pending_step is None:
                debugger.set_init_step(step)  # MSProbe's step is the run's step: its step filter stays real
        except Exception as exc:  # collection must never break the run it watches: say why, run uncollected
            state.failed = True
            state.status(point=point.name, status="error", what=point.forward.name, package=point.framework,
                         version=_version(point.framework), detail=f"{type(exc).__name__}: {exc}")
            return original(self, *args, **kwargs)

        def pre_hook(module: Any, hook_args: tuple[Any, ...], hook_kwargs: dict[str, Any]) -> None:
            device = next(module.parameters()).device.type
            cast = str(torch.get_autocast_dtype(device)) if torch.is_autocast_enabled(device) else "off"
            _log_forward(state, point, step, hook_args, hook_kwargs, cast)
            state.forwards += 1

        hooks = [m.register_forward_pre_hook(pre_hook, with_kwargs=True) for m in models]
        state.active += 1
        debugger.start(model=models[0] if len(models) == 1 else models)
        try:
            return original(self, *args, **kwargs)
        finally:
            debugger.stop()
            state.active -= 1
            for hook in hooks:
                hook.remove()
            state.pending_step = step

    return collected


def _wrap_update(method: Method, original: Any) -> Any:
    import functools
    import inspect

    signature = inspect.signature(original)

    def bump(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        state = _state.get("current")
        if state is None:
            return
        if method.done_when:
            head, _, rest = method.done_when.partition(".")
            bound = signature.bind_partial(self, *args, **kwargs).arguments
            if not (bool(_attr(bound[head], rest)) if head in bound and rest else bool(bound.get(head, True))):
                return  # one bucket of a bucketed update: the sync is not complete yet
        state.flush()  # the window's forwards ran on the previous weights
        state.version += 1

    if inspect.iscoroutinefunction(original):
        @functools.wraps(original)
        async def updated(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = await original(self, *args, **kwargs)
            bump(self, args, kwargs)
            return result
    else:
        @functools.wraps(original)
        def updated(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(self, *args, **kwargs)
            bump(self, args, kwargs)
            return result

    return updated


def _patch(state: _State, module: Any) -> None:
    """Wrap every method of the table that lives in ``module``; a missing one is recorded, never silent."""
    for point in state.points:
        for method, wrap in ((point.forward, _wrap_forward), *((u, _wrap_update) for u in point.weight_updates)):
            if method.module != module.__name__:
                continue
            owner_name, _, attr = method.qualname.rpartition(".")
            owner = getattr(module, owner_name, None)
            original = getattr(owner, attr, None) if owner is not None else None
            if original is None or getattr(original, "_rl_autotest_wrapped", False):
                if original is None:  # a weight update has alternatives: only a missing forward fails collection
                    state.status(point=point.name, status="missing" if method == point.forward else "absent",
                                 what=method.name, package=point.framework, version=_version(point.framework))
                continue
            wrapped = wrap(point, original) if wrap is _wrap_forward else wrap(method, original)
            wrapped._rl_autotest_wrapped = True
            setattr(owner, attr, wrapped)
            state.status(point=point.name, status="attached", what=method.name, package=point.framework,
                         version=_version(point.framework))


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


class _Finder(importlib.abc.MetaPathFinder):
    """Patches a watched module right after it executes (lazy: Ray actors, api_server subprocesses)."""

    def __init__(self, state: _State) -> None:
        self.state = state
        self.watched = {m.module for p in state.points for m in (p.forward, *p.weight_updates)}

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in self.watched:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        state, exec_module = self.state, loader.exec_module

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec: Any) -> Any:
                return loader.create_module(spec)

            def exec_module(self, module: Any) -> None:
                exec_module(module)
                _patch(state, module)

        spec.loader = _Loader()
        return spec


def _check_moved(state: _State) -> None:
    """At exit: a point whose package this process imported, but whose module that package no longer has.

    Looked up from the deepest imported ancestor without importing anything (a parent package of an engine
    may initialise CUDA); a module whose ancestors were never imported is not this process's to judge."""
    import importlib.machinery

    for point in state.points:
        parts = point.forward.module.split(".")
        if point.forward.module in sys.modules or parts[0] not in sys.modules:
            continue
        depth = max(i for i in range(1, len(parts)) if ".".join(parts[:i]) in sys.modules)
        parent = ".".join(parts[:depth])
        path = getattr(sys.modules[parent], "__path__", None)
        child = f"{parent}.{parts[depth]}"
        if path is None or importlib.machinery.PathFinder.find_spec(child, list(path)) is None:
            state.status(point=point.name, status="missing", what=point.forward.name, package=point.framework,
                         version=_version(point.framework), detail=f"{parent} has no {parts[depth]}")


def install(points: tuple[AttachPoint, ...] = POINTS) -> bool:
    """Read ``RL_AUTOTEST_COLLECT`` and install the import hook; False (and nothing done) when unset."""
    path = os.environ.get(ENV)
    if not path or "current" in _state:
        return bool(path)
    with open(path, encoding="utf-8") as fh:
        raw = json.load(fh)
    state = _State(raw, points)
    _state["current"] = state
    finder = _Finder(state)
    sys.meta_path.insert(0, finder)
    for name in sorted(finder.watched & set(sys.modules)):  # imported before us: patch now
        _patch(state, sys.modules[name])
    atexit.register(_check_moved, state)
    return True
