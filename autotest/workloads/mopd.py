"""Tiny multi-teacher on-policy distillation (MOPD) on CPU: the training process.

    XTUNER_OPD_TEACHER_ENDPOINTS_JSON='{"digit_sum_teacher": ["http://127.0.0.1:PORT"], ...}' \\
    python -m autotest.workloads.mopd --work-dir DIR --student CHECKPOINT [--seed N] [--steps 25]
        [--eval-every 5] [--fault judge-bug[:MODE]|crash-at:K|hang-at:K] [--parent-pid PID]
        [--teacher-probe FILE]

The student (the tiny Qwen3 of the GRPO workload, loaded from a checkpoint) samples
responses to prompts of two verifiable task domains with its rollout engine; each sample
carries its data source and is scored, token by token, by its domain's teacher over HTTP;
the trainer minimises the sampled-token k1 reverse KL in policy-gradient form
(``mopd_trainer``); rewards are graded and logged but never enter the update. Eval runs at
step 0 (an eval-only row) and every ``--eval-every`` steps: each domain's eval prompts,
sampled at temperature 1 by an eval engine with its own fixed seed, give
``eval/<domain>/acc`` and ``eval/score``. With ``--teacher-probe`` (the launcher's probe file) the
probe prompts go through each teacher's endpoints before the first step and after the last
(``teacher_probe``): ``distillation/teacher_probe/<teacher>`` at step 1 and at the last step, and
one line in the run log each time. Metrics go to
``$WORK_DIR/<timestamp>/logs/exp_tracking/tracker.jsonl`` (xtuner layout).

Normally started by ``autotest.workloads.mopd_launch``, which serves the teachers. Exit code
0 on success, 1 on a crash (a teacher that stops answering included), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotest.errors import UsageError
from autotest.workloads.faults import make_fault
from autotest.workloads.memory import memory_metrics
from autotest.workloads.regressions import MOPD_REGRESSIONS
from autotest.workloads.tasks import get_task
from autotest.workloads.teacher_client import (
    ENDPOINTS_ENV,
    Routing,
    TeacherClient,
    TeacherError,
    parse_endpoints,
)
from autotest.workloads.teacher_probe import load_references, probe_line, probe_metrics, run_probe
from autotest.workloads.teachers import teacher_name
from autotest.workloads.tiny_lm import TinyLMConfig
from autotest.workloads.tracker import JsonlTracker, make_exp_dir, write_config

#: faults of the GRPO catalogue that mean the same here; the teacher faults live in mopd_launch
TRAINING_FAULTS = ("judge-bug", "crash-at", "hang-at")
#: what ``--fault`` takes: those faults and the detection benchmark's MOPD regressions
ACCEPTED_FAULTS = TRAINING_FAULTS + MOPD_REGRESSIONS


@dataclass(frozen=True)
class MOPDConfig:
    """Everything that defines a run; saved as ``config.json`` beside the logs."""

    student: str
    """Checkpoint dir of the student's starting weights."""
    seed: int = 0
    """Seed of prompt order, sampling and mini-batch order (the student's init is the checkpoint)."""
    steps: int = 25
    """Training steps, numbered 1..steps."""
    eval_every: int = 5
    """Eval after every N-th step (and at step 0)."""
    domains: tuple[str, ...] = ("digit_sum", "digit_product")
    """Task domains (data sources), sampled uniformly per prompt."""
    teacher_map: dict[str, str] = field(default_factory=dict)
    """data source -> teacher name; empty means ``<domain>_teacher`` for every domain."""
    prompts_per_step: int = 256
    """Prompts per step, one response each (distillation needs no groups)."""
    max_new_tokens: int = 8
    """Longest response, ``<eos>`` included."""
    eval_samples: int = 32
    """Samples per eval prompt (pass@1 over 9 prompts x 32 = 288 graded samples per domain and eval point)."""
    eval_seed: int = 12345
    """Seed of the eval engine's sampling: the same for every run, so step-0 eval is identical."""
    lr: float = 1e-3
    """Adam learning rate (constant)."""
    mini_batches: int = 4
    """Optimiser steps per training step."""
    num_threads: int = 1
    """Torch threads (part of the numerics: keep it fixed for a baseline)."""
    teacher_timeout_s: float = 60.0
    """How long one teacher request may take."""
    fault: str = ""
    """Injected training fault ``NAME[:ARG]`` (one of ``TRAINING_FAULTS``); empty for a healthy run."""

    def routing(self) -> Routing:
        """The data-source -> teacher map in force."""
        return Routing(dict(self.teacher_map) or {d: teacher_name(d) for d in self.domains})

    def to_json(self) -> dict[str, Any]:
        """The config as written to ``config.json``."""
        sizes = {f"eval/{d}/acc": len(get_task(d).eval_targets) * self.eval_samples for d in self.domains}
        return {**dataclasses.asdict(self), "teacher_map": dict(self.routing().teacher_of),
                "algorithm": "mopd-sampled-token-k1", "eval_set_size": sizes}


def model_config_of(student: Path) -> TinyLMConfig:
    """The tiny-model shape of a checkpoint (the rollout engines are built from it)."""
    try:
        hf = json.loads((student / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise UsageError(f"--student {student}: no readable config.json; give a checkpoint dir") from None
    return TinyLMConfig(
        hidden_size=hf["hidden_size"], intermediate_size=hf["intermediate_size"],
        num_layers=hf["num_hidden_layers"], num_heads=hf["num_attention_heads"],
        num_kv_heads=hf["num_key_value_heads"], head_dim=hf["head_dim"],
        max_positions=hf["max_position_embeddings"], rms_norm_eps=hf["rms_norm_eps"],
        initializer_range=hf["initializer_range"],
    )


@dataclass(frozen=True)
class _Parts:
    """The components of one run, built once."""

    tasks: dict[str, Any]
    judges: dict[str, Any]
    routing: Routing
    client: TeacherClient
    trainer: Any
    rollout: Any
    evaluator: Any
    tracker: Any
    hooks: Any
    #: the teacher probe's references (None: no probe) and the probe metrics waiting for their step's row
    probe: Any = None
    probe_rows: dict[int, dict[str, float]] = field(default_factory=dict)


def run(config: MOPDConfig, work_dir: Path, endpoints_json: str, probe: dict[str, Any] | None = None) -> Path:
    """Run the workload; returns the experiment dir. ``probe``: the teacher probe's references."""
    import torch

    from autotest.workloads.mopd_trainer import DistillOptim, DistillTrainer
    from autotest.workloads.rollout import RolloutEngine

    torch.set_num_threads(config.num_threads)
    hooks = make_fault(config.fault, config.seed)
    tasks = {d: get_task(d) for d in config.domains}
    routing = config.routing()
    client = TeacherClient(parse_endpoints(endpoints_json), routing, config.teacher_timeout_s)
    model_config = model_config_of(Path(config.student))
    exp_dir = make_exp_dir(work_dir)
    write_config(exp_dir, config.to_json())
    threads = config.num_threads
    parts = _Parts(
        tasks=tasks, judges={d: hooks.wrap_judge(t.judge) for d, t in tasks.items()}, routing=routing, client=client,
        trainer=DistillTrainer(Path(config.student), DistillOptim(lr=config.lr, mini_batches=config.mini_batches),
                               config.seed, threads),
        rollout=RolloutEngine(model_config, "fp32", config.seed, config.max_new_tokens, num_threads=threads),
        evaluator=RolloutEngine(model_config, "fp32", config.eval_seed, config.max_new_tokens, num_threads=threads),
        tracker=hooks.wrap_tracker(JsonlTracker(exp_dir)), hooks=hooks, probe=probe)
    print(f"[tiny-mopd] exp dir {exp_dir} (fault: {config.fault or 'none'}); teachers "
          f"{json.dumps(client.endpoints)}; routing {json.dumps(dict(routing.teacher_of))}", flush=True)
    try:
        parts.rollout.load_weights(parts.trainer.state_dict(), 0)
        scores = _evaluate(parts, config, 0)
        parts.tracker.write({**scores, "step": 0})
        print(f"[tiny-mopd] step 0 {_fmt(scores)}", flush=True)
        if probe is not None:  # logged on step 1's row: a row at step 0 other than eval would make it a train step
            parts.probe_rows[1] = _probe(parts, "start (before step 1)")
        prompt_gen = torch.Generator().manual_seed(config.seed)
        for step in range(1, config.steps + 1):
            _train_step(parts, config, prompt_gen, step)
    finally:
        client.close()
        parts.tracker.close()
    return exp_dir


def _train_step(parts: _Parts, config: MOPDConfig, prompt_gen: Any, step: int) -> None:
    """One iteration: sample, grade, score with the teachers, distil, sync, maybe eval; writes its rows."""
    import torch

    start = time.perf_counter()
    parts.hooks.on_step_start(step)
    prompts = parts.hooks.on_prompts(_sample_prompts(parts.tasks, config, prompt_gen), step)
    batch = parts.rollout.generate(prompts, 1, step)
    t_generate = time.perf_counter()
    rewards = torch.tensor([parts.judges[p.data_source](p.target, r)
                            for p, r in zip(batch.prompts, batch.responses(), strict=True)])
    teacher_logp = _teacher_logprobs(parts.client, batch, step, parts.hooks)
    t_teacher = time.perf_counter()
    teachers = [parts.routing.teacher_of[p.data_source] for p in batch.prompts]
    result = parts.trainer.distill_step(batch, teacher_logp, teachers)
    t_train = time.perf_counter()
    parts.rollout.load_weights(parts.trainer.state_dict(), step)
    t_sync = time.perf_counter()
    summary: dict[str, Any] = {}
    if step % config.eval_every == 0 or step == config.steps:
        summary.update(_evaluate(parts, config, step))
        summary["time/eval"] = time.perf_counter() - t_sync
    summary.update({"time/generate": t_generate - start, "time/teacher": t_teacher - t_generate,
                    "time/train": t_train - t_teacher, "time/sync": t_sync - t_train})
    summary.update(_stats("response/rewards", rewards, with_std=False))
    summary.update(_stats("response/response_len", batch.response_mask.sum(dim=1)))
    summary.update(result.metrics)
    for row in result.mini_batch_rows:
        parts.tracker.write({**{f"train_metrics/worker_0/{k}": v for k, v in row.items()}, "step": step})
    summary.update(memory_metrics())  # memory/rss_mb, memory/peak_rss_mb (autotest.workloads.memory)
    summary["time/step"] = time.perf_counter() - start  # the whole iteration, eval included (as xtuner)
    probed = parts.probe_rows.pop(step, {})
    if step == config.steps and parts.probe is not None:  # after time/step: the probe is not part of a step
        probed = {k: max(v, probed.get(k, 0.0)) for k, v in _probe(parts, f"end (after step {step})").items()}
    summary.update(probed)
    parts.tracker.write({**dict(sorted(summary.items())), "step": step})
    print(f"[tiny-mopd] step {step}/{config.steps} distill_kl {summary['distillation/reduced_distillation_kl']:.4f} "
          f"reward {summary['response/rewards/mean']:.3f} len {summary['response/response_len/mean']:.2f} "
          f"{_fmt({k: v for k, v in summary.items() if k.startswith('eval/')})}time {summary['time/step']:.2f}s",
          flush=True)


def _probe(parts: _Parts, when: str) -> dict[str, float]:
    """The teacher probe through the endpoints the training uses; its metrics (and one log line)."""
    diffs = run_probe(parts.probe, parts.client.endpoints, parts.client.timeout_s)
    print(f"[tiny-mopd] {probe_line(when, diffs, parts.probe.get('tolerance', 1e-3))}", flush=True)
    return probe_metrics(diffs)


def _fmt(scores: dict[str, float]) -> str:
    return "".join(f"{k} {v:.3f} " for k, v in sorted(scores.items()))


def _stats(prefix: str, values: Any, with_std: bool = True) -> dict[str, float]:
    from autotest.workloads.metrics import summary_stats

    return summary_stats(prefix, values, with_std=with_std)


def _sample_prompts(tasks: dict[str, Any], config: MOPDConfig, generator: Any) -> list[Any]:
    """``prompts_per_step`` prompts: a domain uniformly, then one of its training targets uniformly."""
    import torch

    domains = torch.randint(len(config.domains), (config.prompts_per_step,), generator=generator).tolist()
    picks = torch.rand(config.prompts_per_step, generator=generator, dtype=torch.float64).tolist()
    prompts = []
    for d, u in zip(domains, picks, strict=True):
        task = tasks[config.domains[d]]
        prompts.append(task.prompt(task.train_targets[int(u * len(task.train_targets))]))
    return prompts


def _teacher_logprobs(client: TeacherClient, batch: Any, step: int, hooks: Any = None) -> Any:
    """[batch, response_len] teacher log-probs of the sampled tokens (0 on padding)."""
    import torch

    prompt_len = batch.prompt_ids.shape[1]
    width = batch.response_ids.shape[1]
    sources = [p.data_source for p in batch.prompts]
    rows = client.score(sources if hooks is None else hooks.route_sources(sources, step), batch.sequences(), step)
    # row j holds log p(token j+1 | ...): the response starts at token prompt_len
    return torch.tensor([r[prompt_len - 1:] + [0.0] * (width - (len(r) - prompt_len + 1)) for r in rows])


def _evaluate(parts: _Parts, config: MOPDConfig, step: int) -> dict[str, float]:
    """``eval/<domain>/acc`` and ``eval/score`` with the student's current weights."""
    parts.evaluator.load_weights(parts.trainer.state_dict(), step)
    scores: dict[str, float] = {}
    total, count = 0.0, 0
    for domain, task in parts.tasks.items():
        batch = parts.evaluator.generate(task.eval_prompts(), config.eval_samples, step)
        graded = [task.judge(p.target, r) for p, r in zip(batch.prompts, batch.responses(), strict=True)]
        scores[f"eval/{domain}/acc"] = sum(graded) / len(graded)
        total += sum(graded)
        count += len(graded)
    scores["eval/score"] = total / count
    return scores


def _watch_parent(parent_pid: int) -> None:
    """Exit when the launcher is gone: a training process never outlives it."""
    while os.getppid() == parent_pid:
        time.sleep(0.5)
    try:
        print(f"[tiny-mopd] launcher (pid {parent_pid}) is gone: exiting", file=sys.stderr, flush=True)
    finally:  # stderr may be a pipe that died with the launcher
        os._exit(1)


def build_config(args: argparse.Namespace) -> MOPDConfig:
    """The run config from the command line."""
    for name in ("steps", "eval_every", "prompts_per_step", "mini_batches"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')}: must be a positive integer (got {getattr(args, name)})")
    if args.fault and args.fault.partition(":")[0] not in ACCEPTED_FAULTS:
        raise UsageError(f"--fault {args.fault}: not a training fault of tiny MOPD; choose one of "
                         f"{', '.join(ACCEPTED_FAULTS)} (teacher faults are injected by mopd_launch)")
    for domain in args.domains.split(","):
        get_task(domain)
    if not (args.student / "config.json").is_file():
        raise UsageError(f"--student {args.student}: no config.json there; give the student's checkpoint dir")
    config = MOPDConfig(student=str(args.student.resolve()), seed=args.seed, steps=args.steps,
                        eval_every=args.eval_every, domains=tuple(args.domains.split(",")),
                        prompts_per_step=args.prompts_per_step, mini_batches=args.mini_batches,
                        fault=args.fault or "", **({"lr": args.lr} if args.lr is not None else {}))
    return make_fault(config.fault, config.seed).configure(config)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    defaults = MOPDConfig(student="")
    p = argparse.ArgumentParser(prog="python -m autotest.workloads.mopd", description=__doc__.split("\n\n")[0])
    p.add_argument("--work-dir", type=Path, help="where the timestamped exp dir goes (default: $WORK_DIR)")
    p.add_argument("--student", type=Path, required=True, help="the student's checkpoint dir")
    p.add_argument("--seed", type=int, default=defaults.seed)
    p.add_argument("--steps", type=int, default=defaults.steps)
    p.add_argument("--eval-every", type=int, default=defaults.eval_every)
    p.add_argument("--domains", default=",".join(defaults.domains), help="comma-separated task domains")
    p.add_argument("--prompts-per-step", type=int, default=defaults.prompts_per_step)
    p.add_argument("--mini-batches", type=int, default=defaults.mini_batches)
    p.add_argument("--lr", type=float, default=None, help=f"Adam learning rate (default {defaults.lr})")
    p.add_argument("--fault", help=f"inject a training fault NAME[:ARG] ({', '.join(ACCEPTED_FAULTS)})")
    p.add_argument("--parent-pid", type=int, help="exit when this process (the launcher) is gone")
    p.add_argument("--teacher-probe", type=Path, help="the launcher's probe file: probe each teacher at start and end")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parse_args(argv)
    if args.parent_pid is not None:
        threading.Thread(target=_watch_parent, args=(args.parent_pid,), daemon=True).start()
    try:
        work_dir = args.work_dir or (Path(os.environ["WORK_DIR"]) if os.environ.get("WORK_DIR") else None)
        if work_dir is None:
            raise UsageError("--work-dir: missing; pass --work-dir DIR or set WORK_DIR")
        endpoints = os.environ.get(ENDPOINTS_ENV)
        if not endpoints:
            raise UsageError(f"{ENDPOINTS_ENV} is not set; start the teachers with "
                             "python -m autotest.workloads.mopd_launch, which exports it")
        probe = load_references(args.teacher_probe) if args.teacher_probe else None
        run(build_config(args), work_dir, endpoints, probe)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except TeacherError as exc:
        print(f"error: TeacherError: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
