"""The experiment card: shown before a run starts and saved with its results as card.md.

Seed 003 asks for a card before launching: 目标 (goal), 判读标准 (pass criteria), 最小规模
(minimal scale) and 前置条件 (prerequisites), here with the exact command (redacted), cwd and
env overrides. The card only renders what the case, the preflight and the baseline say; the
pass criteria strings come from the baseline (the caller passes them in).
"""

from __future__ import annotations

import os
import shlex

from autotest.inputs.baseline import Baseline
from autotest.inputs.case import Case
from autotest.redaction import redact
from autotest.run.isolation import PYTHON_ENV
from autotest.run.launch import LaunchSpec
from autotest.run.preflight import Preflight


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _completion_line(case: Case) -> str:
    steps = case.expected.steps
    shape = f"exactly step {steps}" if case.expected.exact_steps else f"at least step {steps}"
    return (f"completion: the tracker reaches {shape} and the run exits 0 within "
            f"{case.launch.timeout_s:g} s (launch.timeout_s); the exit code alone is not trusted")


def _prerequisites(case: Case, preflight: Preflight) -> list[str]:
    lines = []
    if preflight.inputs:
        lines += ["| input | path | status |", "|---|---|---|"]
        for s in preflight.inputs:
            status = "found" if s.exists else f"**MISSING** ({s.reason})"
            lines.append(f"| {_cell(s.name)} | `{_cell(redact(s.path or s.raw))}` | {status} |")
    else:
        lines.append("- inputs: none declared")
    lines.append("")
    plat = preflight.platform
    fw = case.platform.framework
    gpus = (f"{plat.gpus_needed} GPUs (found {plat.gpus_found}: {plat.gpu_source})"
            if plat.gpus_needed else "CPU only (no GPU needed)")
    lines.append(f"- platform: {gpus}")
    if preflight.framework is not None:
        fwc = preflight.framework
        lines.append(f"- framework under test: {fwc['name']} `{fwc['sha']}` = {fwc['ref']} of {fwc['repo']} "
                     f"(ref from {fwc['origin']}), {'reused' if fwc['reused'] else 'checked out'} at "
                     f"`{fwc['path']}` and exported as ${fw.env if fw else '?'}")
    elif fw is not None:
        lines.append(f"- framework: {fw.name} checkout from ${fw.env}: "
                     f"`{plat.framework_dir or 'not found'}` (as found; no ref asked)")
    if case.platform.python_packages:
        lines.append(f"- Python packages: {', '.join(case.platform.python_packages)}")
    if case.node is not None:  # probed with the GPU slot held, just before launch (autotest.run.node_preconditions)
        lines.append(f"- node, checked before launch: {case.node.describe()}")
    verdict = "runnable here" if plat.runnable else f"**SKIP**: {plat.skip_reason}"
    lines.append(f"- this machine: {verdict}")
    lines.append(f"- commit under test: `{preflight.commit.repo_dir}` {preflight.commit.describe()}")
    if preflight.commit.dirty and preflight.commit.diff_stat:
        lines += ["", "  ```", *(f"  {line}" for line in preflight.commit.diff_stat.splitlines()),
                  "  ```"]
    if preflight.commit.untracked:
        shown = ", ".join(preflight.commit.untracked[:10])
        more = f" and {len(preflight.commit.untracked) - 10} more" if len(preflight.commit.untracked) > 10 else ""
        lines.append(f"- untracked files: {shown}{more}")
    if preflight.harness.repo_dir != preflight.commit.repo_dir:
        lines.append(f"- harness: rl-autotest {preflight.harness_version} at `{preflight.harness.repo_dir}` "
                     f"{preflight.harness.describe()}")
    env = preflight.environment
    framework_env = env.get("framework") or {}
    # the packages the run uses: asked of the framework's Python when the case names one
    packages = framework_env.get("packages") or env.get("packages", {})
    versions = ", ".join(f"{k} {v}" for k, v in packages.items() if v)
    if framework_env.get("python"):
        versions = f"framework python `{framework_env['python']}`: {versions}"
    gpu = env.get("gpu", {})
    hw = (f"{gpu.get('count')} x {', '.join(gpu.get('models') or ['GPU'])}, driver {gpu.get('driver')}, "
          f"CUDA {gpu.get('cuda')}" if gpu.get("count") else "no GPU")
    lines.append(f"- environment: python {env.get('python')}, {versions}; {hw}; "
                 f"{env.get('cpu_count')} CPUs on {env.get('hostname')}")
    return lines


def _launch_lines(case: Case, spec: LaunchSpec | None) -> list[str]:
    if spec is not None:
        command, cwd, env = spec.command_line, str(spec.cwd), spec.env
        note = ""
    else:
        raw = case.launch.command
        command = raw if isinstance(raw, str) else shlex.join(raw)
        cwd, env = case.launch.cwd, case.launch.env
        note = " (template: placeholders are filled per run)"
    lines = [f"Command{note}:", "", "```bash", redact(command), "```", "", f"- cwd: `{cwd}`"]
    # PATH is long and says less than the interpreter it puts first: that gets its own line
    shown = {k: v for k, v in redact(dict(env)).items() if k != "PATH" or spec is None}
    if shown:
        lines.append("- env overrides: " + ", ".join(f"`{k}={v}`" for k, v in shown.items()))
    else:
        lines.append("- env overrides: none")
    if spec is not None and PYTHON_ENV in spec.env:
        lines.append(f"- python: `{spec.env[PYTHON_ENV]}` (its folder first on the run's PATH; the harness venv "
                     "is not on it)")
    work_env = case.tracker.work_dir_env
    inherited = os.environ.get(work_env) if work_env else None
    if spec is not None and work_env and inherited and inherited != spec.env.get(work_env):
        # a WORK_DIR left in the runner's environment would send the run's logs elsewhere: say it is replaced
        lines.append(f"- inherited `{work_env}={redact(inherited)}` is overridden with this run's work folder")
    lines.append(f"- timeout: {case.launch.timeout_s:g} s; the whole process group is killed after it")
    if case.launch.uses_ray:
        ports = (f" on ports {spec.env.get('RAY_HEAD_PORT')}/{spec.env.get('RAY_DASHBOARD_PORT')}"
                 if spec is not None and "RAY_HEAD_PORT" in spec.env else "")
        lines.append(f"- starts its own Ray cluster{ports}: the harness stops that cluster only afterwards "
                     "(never `ray stop --force`)")
    lines.append(f"- tracker: {case.tracker.format} format; baseline `{case.baseline}`")
    lines.append(f"- consistency dump job: {case.consistency.policy}")
    return lines


def render_card(case: Case, preflight: Preflight, criteria: list[str], *,
                spec: LaunchSpec | None = None) -> str:
    """The experiment card as markdown. ``spec`` (the resolved launch) shows the exact command;
    without it the case's command template is shown."""
    wall = (f"; expected wall time under {case.expected.wall_time_s:g} s"
            if case.expected.wall_time_s else "")
    lines = [
        f"# Experiment card: {case.name}", "", f"> {case.description}", "",
        f"Case file `{preflight.case_file}`; prepared {preflight.created_at}.", "",
        "## 目标 Goal", "", case.goal.strip(), "",
        "## 判读标准 Pass criteria", "",
        *(f"- {c}" for c in criteria),
        f"- {_completion_line(case)}", "",
        "Verdict: FAIL if a gate fails, else ERROR if a gate cannot be decided, else PASS.", "",
        "## 最小规模 Minimal scale", "", case.minimal_scale.strip(), "",
        f"- expected: {case.expected.steps} steps"
        f"{' (exact)' if case.expected.exact_steps else ''}{wall}", "",
        "## 前置条件 Prerequisites", "", *_prerequisites(case, preflight), "",
        "## 启动 Launch", "", *_launch_lines(case, spec), "",
    ]
    return "\n".join(lines)


def card_criteria(baseline: Baseline | None, error: str | None) -> list[str]:
    """The card's 判读标准: every check and structural bound of the baseline, or why it could not be loaded."""
    if baseline is None:
        return [f"baseline could not be loaded: {error}"]
    lines = [c.describe() for c in baseline.checks]
    if baseline.steps.expected is not None:
        lines.append(f"{'exactly' if baseline.steps.exact else 'at least'} {baseline.steps.expected} training steps")
    if baseline.calibrated_range:
        lines.append(f"checked on the calibrated range {baseline.calibrated_range[0]}-{baseline.calibrated_range[1]}"
                     "; later steps reported as uncalibrated")
    if baseline.wall_time_max_s:
        hardware = f" (for {baseline.wall_time_hardware})" if baseline.wall_time_hardware else ""
        lines.append(f"end-to-end wall time < {baseline.wall_time_max_s:g} s{hardware}")
    return lines


def hardware_thresholds(baseline: Baseline | None) -> list[str]:
    """Which per-hardware overrides this node's GPUs picked (shown in the card's criteria and the report)."""
    if baseline is None:
        return []
    lines = [f"{c.check_id}: threshold {c.threshold:g} for {c.hardware}" for c in baseline.checks if c.hardware]
    if baseline.wall_time_hardware:
        lines.append(f"wall_time: max_s {baseline.wall_time_max_s:g} for {baseline.wall_time_hardware}")
    return lines
