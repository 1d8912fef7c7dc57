"""The consistency dump job: request → screening → collection (statistics, then tensors) → analysis.

``run_consistency_job(results_dir)`` reads the ``consistency_request.json`` an accuracy run left,
screens the run's metrics and saved config (seed 000 step 0), generates a diagnostic wrapper that
re-runs the case's own launch command with only diagnostic overrides (dump on, the window step,
one sample per micro-batch, the first few forwards of each side), runs it when the case can run
here, narrows a second pass to the suspect modules with full tensors, and writes output_1 …
output_5 into ``<results>/consistency/``. A step that did not run is reported as not run.

A case whose launch takes no diagnostic option (no ``consistency.diagnostic_args``: xtuner, verl, slime)
is re-run with collection attached through the environment only (:mod:`.attach_run`: the collection
module first on ``PYTHONPATH``, ``RL_AUTOTEST_COLLECT``), never with extra launch arguments. When a side
collects nothing (a point the installed framework lacks, or no point imported) the job ends
"not collected" with one line naming it, plus ``how_to_collect.md`` (:mod:`.not_collected`); the CLI
exits 3, which the nightly treats as neutral.

The request's paths are relative to its own folder (schema 2), so the job runs from an uploaded
results artifact on another runner; the absolute paths of schema-1 requests are still read.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from autotest.consistency.analyze import analyze_dumps
from autotest.consistency.attach_run import attach_env, missing_lines, read_status, side_lines
from autotest.consistency.layout import parse_layout
from autotest.consistency.config import parse_diagnostic_config
from autotest.consistency.logprob_compare import NOT_PROVIDED
from autotest.consistency.logprob_records import FOLDER as LOGPROB_FOLDER
from autotest.consistency.msprobe_config import tensor_pass_config, write_msprobe_configs
from autotest.consistency.not_collected import write_manual_steps
from autotest.consistency.screening import screen_run
from autotest.errors import UsageError
from autotest.shell_script import command, comment
from autotest.files import portable, write_atomic
from autotest.inputs.case import REPO_ROOT, Case, load_case
from autotest.redaction import redact
from autotest.run.framework import FrameworkRequest, checkout, default_cache_dir
from autotest.run.launch import launch_spec
from autotest.run.platform import check_platform
from autotest.run.process_group import launch

REQUEST_FILE = "consistency_request.json"
DEFAULT_MAX_FORWARDS = 2


@dataclass(frozen=True)
class JobOutcome:
    out_dir: Path
    verdict: str  # root_cause_found | no_divergence | cannot_conclude
    executed: bool
    report_md: Path
    report_json: Path
    summary: str
    #: collection impossible: the framework has no hook wired (not an error of the run)
    not_collected: bool = False
    #: the steps to collect by hand, when not collected
    manual_steps: Path | None = None


def load_request(results_dir: Path) -> dict[str, Any]:
    path = Path(results_dir) / REQUEST_FILE
    if not path.is_file():
        raise UsageError(f"{path}: no consistency request here; the accuracy run requests one when a "
                         "consistency metric breaches (policy on-breach) or always")
    try:
        request = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}:{exc.lineno}: malformed JSON ({exc.msg}); re-run the accuracy case") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text; re-run the accuracy case") from None
    redo = "re-run the accuracy case to write a new one"
    if not isinstance(request, dict):
        kind = "null" if request is None else f"a JSON {type(request).__name__}"
        raise UsageError(f"{path}: the request is {kind}, not an object; {redo}")
    for key, kind in (("case_file", str), ("breaches", list), ("tracker", str), ("results_dir", str)):
        if key not in request:
            raise UsageError(f"{path}: key '{key}' is missing; the request was not written by rl-autotest")
        if not isinstance(request[key], kind) or (kind is str and not request[key]):
            what = "a list of breached checks" if kind is list else "a non-empty text"
            raise UsageError(f"{path}: key '{key}' is {_json_kind(request[key])}, not {what}; {redo}")
    for i, breach in enumerate(request["breaches"]):
        step = breach.get("first_breach_step") if isinstance(breach, dict) else None
        if not isinstance(breach, dict) or not (step is None or type(step) is int and step >= 0):
            raise UsageError(f"{path}: breaches[{i}] is not a breached check with a whole-number "
                             f"first_breach_step; {redo}")
    # relative paths are relative to the request's folder; an absolute one (schema 1) stays as it is
    for key in ("results_dir", "work_dir", "tracker", "run_config"):
        if isinstance(request.get(key), str):
            request[key] = str((path.parent / request[key]).resolve())
    return request


def _json_kind(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a text", list: "a list", dict: "an object"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def request_case(request: dict[str, Any]) -> Case:
    """The requested case: its file (relative to the harness checkout, or absolute), else by name.

    A request made on another runner names a file that may not exist here; the packaged case of the
    same name is the same case file at this harness's commit.
    """
    named = Path(request["case_file"])
    path = named if named.is_absolute() else REPO_ROOT / named
    if path.is_file() or not request.get("case"):
        return load_case(path)
    return load_case(str(request["case"]))


def _module_path(key: str) -> str:
    """``Module.model.layers.1.mlp.Qwen3MLP.forward.0`` → ``model.layers.1.mlp``."""
    parts = key.split(".")
    if parts and parts[0] == "Module":
        parts = parts[1:]
    return ".".join(parts[:-3]) if len(parts) > 3 else ".".join(parts)


def write_wrapper(path: Path, spec, diagnostic_config: Path) -> Path:
    """A standalone script that re-runs the case's launch with the diagnostic overrides."""

    # every line from an argument list (autotest.shell_script): `export 'KEY=value'` keeps a hostile name one word
    lines = ["#!/usr/bin/env bash",
             comment("Consistency dump re-run: the case's own launch command plus diagnostic overrides only."),
             comment(f"diagnostic config: {diagnostic_config}"), "set -euo pipefail", command(["cd", str(spec.cwd)])]
    for key, value in sorted(redact(dict(spec.env)).items()):
        lines.append(command(["export", f"{key}={value}"]))
    # a string command runs as `bash -c '<command>'` (as launched): a bare `exec a && b` would never run b
    lines.append(command(["exec", *spec.argv]))
    write_atomic(path, "\n".join(lines) + "\n")  # whole or absent on a full disk, never an empty wrapper
    path.chmod(0o755)
    return path


def _side_paths(config: dict[str, Any]) -> dict[str, Path]:

    cfg = parse_diagnostic_config(config)
    return {"rollout_dump": cfg.rollout.dump_path, "actor_dump": cfg.actor.dump_path,
            "rollout_log": cfg.rollout.correlation_log, "actor_log": cfg.actor.correlation_log,
            "logprobs": cfg.output_dir / LOGPROB_FOLDER}


def _collect(case, config: dict[str, Any], folder: Path, seed, fault, launcher: Callable,
             extra_env: dict[str, str]) -> tuple[Any, Path, Any]:
    """Write the diagnostic config and wrapper for one pass; run it when ``launcher`` is given."""

    folder.mkdir(parents=True, exist_ok=True)
    config_path = folder / "diagnostic_config.json"
    write_atomic(config_path, json.dumps(config, indent=2) + "\n")
    args = tuple(a.replace("{diagnostic_config}", str(config_path)) for a in case.consistency.diagnostic_args)
    spec = launch_spec(case, folder / "work", seed=seed, fault=fault, extra_args=args,
                       environ={**os.environ, **extra_env})
    spec = replace(spec, env={**extra_env, **spec.env})
    if not args:  # attached through the environment only; each process reads its side's MSProbe config
        write_msprobe_configs(parse_diagnostic_config(config))
        spec = replace(spec, env={**spec.env, **attach_env(config_path, {**os.environ, **spec.env})})
    wrapper = write_wrapper(folder / "diagnostic_wrapper.sh", spec, config_path)
    result = launcher(spec, folder) if launcher else None
    return spec, wrapper, result


def run_consistency_job(results_dir: str | Path, *, execute: bool = True,
                        max_forwards_per_side: int = DEFAULT_MAX_FORWARDS,
                        progress: Callable[[str], None] | None = None) -> JobOutcome:

    if max_forwards_per_side < 0:
        raise UsageError(f"--max-forwards: {max_forwards_per_side} is below 0; give the forwards to dump per side "
                         "(0 = all)")
    results_dir = Path(results_dir).resolve()
    request = load_request(results_dir)
    case = request_case(request)
    out = results_dir / "consistency"
    out.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda line: None)

    run_config = _run_config_file(results_dir)
    screening = screen_run(Path(request["tracker"]), run_config, request["breaches"])
    breach_steps = [b["first_breach_step"] for b in request["breaches"] if b.get("first_breach_step") is not None]
    window = screening.first_breach_step or (min(breach_steps) if breach_steps else None)
    context = _run_context(results_dir)
    seed, fault = context.get("seed"), context.get("fault")
    framework_env = _framework_env(case, context.get("framework"))
    screening_dict = screening.to_dict()
    # per-step values stay in the tracker; the report keeps the window's
    per_step = screening_dict.pop("per_step", {}) or {}
    screening_dict["window_values"] = per_step.get(window, per_step.get(str(window), {}))

    platform = check_platform(case)
    reasons_not_run = []
    attached = not case.consistency.diagnostic_args
    if not platform.runnable:
        reasons_not_run.append(f"the case cannot run here: {platform.skip_reason}")
    if window is None:
        reasons_not_run.append("no diagnostic window: screening found no breached step (inconclusive)")
    if not execute:
        reasons_not_run.append("collection not executed on request (--no-execute)")
    runnable = not reasons_not_run

    stats_config = {"output_dir": str(out / "statistics"), "window_step": int(window or 1), "micro_batch_size": 1,
                    "max_forwards_per_side": max_forwards_per_side, "task": "statistics",
                    "msprobe_log_level": "error"}
    runner = launch if runnable else None
    say(f"[consistency] {case.name}: statistics pass at step {window}" if runnable else
        f"[consistency] {case.name}: not executed: {'; '.join(reasons_not_run)}")
    spec, wrapper, stats_run = _collect(case, stats_config, out / "statistics", seed, fault, runner,
                                        framework_env)
    paths = _side_paths(stats_config)
    job_context = {"case": case.name, "request": str(results_dir / REQUEST_FILE), "screening": screening_dict,
                   "window_step": window, "seed": seed, "fault": fault,
                   "diagnostic_overrides": {k: v for k, v in stats_config.items() if k != "output_dir"},
                   "not_executed": reasons_not_run, "statistics_pass": _launch_summary(stats_run),
                   # what the accuracy run breached: aligned modules then put the divergence after the model
                   "breached_metrics": sorted({b["metric"] for b in request["breaches"] if b.get("metric")}),
                   # each side's parallel layout (the case's consistency.layout): per-rank dumps are reassembled
                   "layout": [list(pair) for pair in case.consistency.layout]}
    report = _analyze(analyze_dumps, paths, out / "statistics" / "analysis", wrapper, job_context, use_tensors=False)

    final_dir, final_wrapper = out / "statistics" / "analysis", wrapper
    suspects = [s for s in report.suspects if s.get("module")]
    if runnable and report.verdict == "root_cause_found" and suspects:
        # From the keys, not the module label: a fused group's label names all its parts at once.
        actor_modules = sorted({_module_path(k) for s in suspects for k in s.get("train_keys", [])})
        rollout_modules = sorted({_module_path(k) for s in suspects for k in s.get("rollout_keys", [])})
        tensor_config = tensor_pass_config(stats_config, out / "tensor", rollout_modules or actor_modules,
                                           actor_modules)
        say(f"[consistency] {case.name}: tensor pass on {', '.join(actor_modules)}")
        _, final_wrapper, tensor_run = _collect(case, tensor_config, out / "tensor", seed, fault, launch,
                                                framework_env)
        job_context["tensor_pass"] = _launch_summary(tensor_run)
        paths = _side_paths(tensor_config)
        report = _analyze(analyze_dumps, paths, out, final_wrapper, job_context, use_tensors=True)
        final_dir = out
    elif final_dir != out:
        report = _analyze(analyze_dumps, paths, out, wrapper, job_context, use_tensors=False)
        final_dir = out
    manual, not_collected = None, _not_collected(out / "statistics", _side_paths(stats_config)) if attached and runnable else []
    if attached and not runnable:
        not_collected = [f"not collected: {reasons_not_run[0]}"]
    if not_collected:
        framework = case.platform.framework.name if case.platform.framework else case.name
        manual = write_manual_steps(results_dir, out, case_name=case.name, case_file=case.source,
                                    framework=framework, wrapper=wrapper,
                                    diagnostic_config=out / "statistics" / "diagnostic_config.json",
                                    paths=_side_paths(stats_config), lines=not_collected)
        also = "".join(f"; {reason}" for reason in reasons_not_run[1:])
        summary = f"{'; '.join(not_collected)}{also}; the wrapper and how to collect by hand: {manual}"
    else:
        summary = _summary(report, reasons_not_run, job_context["breached_metrics"])
    outcome = JobOutcome(out, report.verdict, runnable, out / "output_5_root_cause_report.md",
                         out / "output_5_root_cause_report.json", summary, not_collected=bool(not_collected),
                         manual_steps=manual)
    _link_from_accuracy_report(results_dir, outcome)
    return outcome


def _analyze(analyze_dumps: Callable[..., Any], paths: dict[str, Path], out: Path, wrapper: Path,
             context: dict[str, Any], use_tensors: bool) -> Any:
    """The same analysis ``consistency analyze`` runs, on this job's collection (its logs pair the sides)."""
    # the workload writes the per-token log-prob records beside its dumps; a framework may write none
    logprobs = [paths["logprobs"]] if paths["logprobs"].is_dir() else None
    layouts = {side: parse_layout(text, f"{context['case']}: consistency.layout.{side}")
               for side, text in context.get("layout", ())}
    return analyze_dumps(paths["actor_dump"], paths["rollout_dump"], out, train_correlation=paths["actor_log"],
                         rollout_correlation=paths["rollout_log"], wrapper_path=wrapper, context=context,
                         use_tensors=use_tensors, logprobs=logprobs, layouts=layouts)


def _not_collected(folder: Path, paths: dict[str, Path]) -> list[str]:
    """After an attached pass: one line per missing attach point, else per side that dumped nothing."""
    status = read_status(folder)
    dumped = {side: any(paths[f"{side}_dump"].rglob("dump.json")) if paths[f"{side}_dump"].is_dir() else False
              for side in ("actor", "rollout")}
    return missing_lines(status) or side_lines(status, dumped)


def _summary(report, reasons_not_run: list[str], breached: list[str] | None = None) -> str:
    if reasons_not_run:
        return "not executed: " + "; ".join(reasons_not_run)
    if report.divergence == "sampling_path" and report.root_cause:
        return (f"sampling-path divergence ({report.confidence} confidence): {report.root_cause['why']}; "
                "next: check the sampling temperature (and the one the reported log-probs use), top-p/top-k, "
                "logits processors and log-prob gathering")
    if report.divergence == "decode_path" and report.root_cause:
        return (f"decode-path divergence ({report.confidence} confidence, root cause decode_path): "
                f"{report.root_cause['why']}; next: check the decode forwards' position ids and KV cache")
    if report.verdict == "root_cause_found" and report.root_cause:
        cause = report.root_cause
        if report.divergence == "sampling_path_and_module":
            return (f"module divergence at {cause['module']} ({cause['bucket']}, {report.confidence} confidence, "
                    f"localised to {cause['localisation']}) and a sampling-path divergence: "
                    f"{_pair_line(report, 'sampling_path')}")
        sampling_clear = report.logprobs and report.logprobs["pairs"][0]["status"] == "agrees"
        return (f"root cause ({report.confidence} confidence): {cause['bucket']} at {cause['module']} "
                f"(localised to {cause['localisation']})"
                + (f"; the sampling path is clear (recorded = the rollout's recompute), "
                   f"{_pair_line(report, 'model')}" if sampling_clear else ""))
    if report.verdict == "cannot_conclude":
        return "cannot conclude: " + "; ".join(c.detail for c in report.cannot_conclude[:3])
    if report.verdict == "no_divergence" and breached and report.divergence == "aligned":
        return (f"the window does not reproduce the breach: every dumped module is aligned and the recorded, "
                f"recomputed and trainer log-probs agree ({_pair_line(report, 'end_to_end')}), yet "
                f"{', '.join(breached)} breached; next: dump the step it breached at")
    if report.divergence == "module":
        return (f"module divergence, not localised by the dumps: {_pair_line(report, 'model')}; next: rerun the "
                "window with the tensor pass and compare what is not dumped (final norm, lm_head, log_softmax)")
    if report.verdict == "no_divergence" and breached:
        # never "no divergence" under a breach: the dumps cover the model, not how its logits are sampled
        unchecked = report.logprobs["pairs"][0]["detail"] if report.logprobs else NOT_PROVIDED
        return (f"{unchecked}; inferred: every dumped module is aligned, yet {', '.join(breached)} breached: the "
                "divergence is after the model, in the sampling path; next: check the sampling temperature (and "
                "the one the reported log-probs use), top-p/top-k, logits processors and log-prob gathering")
    return report.verdict.replace("_", " ")


def _pair_line(report, name: str) -> str:
    pair = next(p for p in report.logprobs["pairs"] if p["pair"] == name)
    if pair["k3"] is None:
        return f"{pair['reference']} vs {pair['other']} not compared ({pair['detail']})"
    return (f"{pair['reference']} vs {pair['other']} k3 {pair['k3']:.3e}, max |diff| {pair['max_abs_diff']:.3e} "
            f"over {pair['tokens']} token(s)")


def _launch_summary(result) -> dict[str, Any] | None:
    if result is None:
        return None
    return {"exit_code": result.exit_code, "timed_out": result.timed_out, "wall_s": round(result.wall_s, 2),
            "stdout_log": str(result.stdout_log), "stderr_log": str(result.stderr_log)}


def _framework_env(case: Case, recorded: dict[str, Any] | None) -> dict[str, str]:
    """The re-run uses the framework commit the accuracy run tested: checked out here from its record."""
    if not recorded or case.platform.framework is None:
        return {}
    request = FrameworkRequest(name=recorded["name"], env=case.platform.framework.env, repo=recorded["repo"],
                               ref=recorded["sha"], origin="results.json")
    return {request.env: checkout(request, default_cache_dir(os.environ)).path}


def _run_config_file(results_dir: Path) -> Path | None:
    folder = results_dir / "run_config"
    found = sorted(folder.rglob("config.json")) if folder.is_dir() else []
    return found[0] if found else None


def _run_context(results_dir: Path) -> dict[str, Any]:
    path = results_dir / "results.json"
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8")).get("context", {})


def _link_from_accuracy_report(results_dir: Path, outcome: JobOutcome) -> None:
    """The accuracy report points to the root-cause report (appended, never rewritten)."""
    report = results_dir / "report.md"
    if not report.is_file():
        return
    # relative to the results folder, as every link in report.md: the folder is uploaded and moved
    section = (f"\n## Consistency dump job\n\n- {outcome.summary}\n"
               f"- root-cause report: `{portable(str(outcome.report_md), results_dir)}`\n"
               f"- artifacts: `{portable(str(outcome.out_dir), results_dir)}`\n")
    with report.open("a", encoding="utf-8") as handle:
        handle.write(section)
