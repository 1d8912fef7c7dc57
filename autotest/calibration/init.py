"""``rl-autotest init``: from a launch command, one run (or an existing log) to a case and a baseline spec.

It runs the command once in a fresh work folder under the results root (``{work_dir}``, ``{seed}`` =
0 and ``{python}`` are substituted as in a case; ``$WORK_DIR`` is set), or reads the log given with
``--log``; finds the metric log the run wrote; assigns each metric its role
(:mod:`autotest.inputs.roles`); and writes

- ``<cases>/<name>.yaml``: the case (the command, the log's format and place, the steps the run reached,
  seed 0 for gating runs and seeds 1-10 for calibration when the command takes ``{seed}``), and
- ``<baselines>/<name>.yaml``: the checks proposed per role (:mod:`autotest.calibration.proposals`),
  every threshold ``placeholder``, so any run against it is an ERROR until ``rl-autotest calibrate``.

It never overwrites: when both files exist a re-run says so and what to do next; when one exists it
refuses. A command that fails, times out or logs nothing is one line naming what happened.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from autotest.calibration.proposals import PRODUCED_BY_INIT, Proposal, baseline_spec, propose, with_spec_checks
from autotest.errors import UsageError
from autotest.files import write_atomic
from autotest.inputs.baseline import load_baseline
from autotest.inputs.baseline_writer import baseline_yaml
from autotest.inputs.framework_spec_checks import spec_checks
from autotest.inputs.log_search import JSONL, looked_for
from autotest.inputs.log_search import find_logs as search_logs
from autotest.inputs.placeholders import placeholder_values
from autotest.inputs.schema import expand_env
from autotest.readers.reading import read_trace
from autotest.judge.trace import Trace
from autotest.run.framework_spec_read import import_spec
from autotest.run.launch import LaunchSpec
from autotest.run.process_group import launch
from autotest.run.results_dir import fresh_folder, run_stamp

DEFAULT_TIMEOUT_S = 1800.0
#: the seed a gating run uses, and the calibration runs' seeds: never the same, so a gate is judged on a seed
#: its thresholds did not see; ten of them, the runs ``power`` advises (judge/power.py MORE_RUNS): with 3 a
#: pooled gate's t quantile alone is ~4x the 1-sigma noise, and ``power`` would advise 10 at once
DEFAULT_SEED = 0
CALIBRATION_SEEDS = tuple(range(1, 11))
#: where a run's own logs go (stdout/stderr), never taken for its metric log
_LAUNCH_LOGS = "logs"


@dataclass(frozen=True)
class InitOptions:
    name: str
    #: the launch command, one argument per word; ``{work_dir}``, ``{seed}``, ``{python}`` allowed
    command: tuple[str, ...]
    cases_dir: Path
    baselines_dir: Path
    results_root: Path
    #: read this log instead of running the command (``{work_dir}`` not allowed here)
    log: Path | None = None
    #: the log's format (auto: sniffed)
    format: str = "auto"
    #: write ``baseline:`` into the case (False: the project's default, <baselines>/<name>.yaml, applies)
    baseline_key: bool = True
    #: the metric-name preset (None: inferred from the names)
    preset: str | None = None
    marker: str = "grpo"
    timeout_s: float = DEFAULT_TIMEOUT_S
    progress: Callable[[str], None] | None = None
    #: ``PATH:CASE``: the framework's own spec (read at the commit checked out here) whose checks init proposes
    framework_spec: str | None = None


@dataclass(frozen=True)
class InitOutcome:
    case_path: Path
    baseline_path: Path
    #: False: both files existed, nothing was run or written
    written: bool
    proposal: Proposal | None = None
    log: Path | None = None
    log_format: str = ""
    wall_s: float | None = None


def _say(options: InitOptions, line: str) -> None:
    if options.progress:
        options.progress(line)


def existing(options: InitOptions) -> InitOutcome | None:
    """Both files there: nothing to do (None: neither is). One of them there: a refusal."""
    case_path = options.cases_dir / f"{options.name}.yaml"
    baseline_path = options.baselines_dir / f"{options.name}.yaml"
    there = [p for p in (case_path, baseline_path) if p.exists()]
    if len(there) == 2:
        return InitOutcome(case_path, baseline_path, written=False)
    if there:
        missing = baseline_path if there[0] == case_path else case_path
        raise UsageError(f"{there[0]}: already exists and {missing} does not; init never overwrites: remove "
                         f"{there[0]} to start again, or write {missing} by hand")
    return None


def _run_once(options: InitOptions) -> tuple[Path, float]:
    """Run the command once; (its work folder, wall seconds). A failure or timeout is one UsageError."""
    # ${NAME} (an interpreter of the framework's own venv: '${FRAMEWORK_PYTHON}') is read from the environment
    # as a case run reads it, before any folder is made; the case keeps it as written
    words = [expand_env(word, f"init: command word {i + 1} {word!r}",
                        when="before rl-autotest init (the case's runs read it too)")
             for i, word in enumerate(options.command)]
    folder = fresh_folder(options.results_root / options.name, f"init-{run_stamp()}")
    work_dir = folder / "work"
    work_dir.mkdir()
    values = placeholder_values(work_dir=work_dir, seed=DEFAULT_SEED)
    command = tuple(_substitute(word, values) for word in words)
    spec = LaunchSpec(command=command, cwd=Path.cwd(), env={"WORK_DIR": str(work_dir)}, timeout_s=options.timeout_s)
    _say(options, f"running once: {spec.command_line}")
    result = launch(spec, folder)
    if result.timed_out:
        raise UsageError(f"init: {shlex.join(options.command)}: did not finish within {options.timeout_s:g} s "
                         f"(--timeout-s); nothing written; its output: {result.stdout_log}, {result.stderr_log}")
    if result.exit_code != 0:
        how = f"exit code {result.exit_code}" if result.exit_code is not None else f"signal {result.signal}"
        raise UsageError(f"init: {shlex.join(options.command)}: failed ({how}) after {result.wall_s:.0f} s; "
                         f"nothing written; {_last_line(result.stderr_log)}its output: {result.stderr_log}")
    return work_dir, result.wall_s


def _substitute(word: str, values: dict[str, str]) -> str:
    for key in ("python", "work_dir", "seed"):
        word = word.replace("{" + key + "}", values[key])
    return word


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
                 if line.strip()]
    except OSError:
        return ""
    return f"last line: {lines[-1][:200]!r}; " if lines else ""


def find_logs(work_dir: Path) -> list[Path]:
    """Metric logs a run wrote under ``work_dir`` (:func:`autotest.inputs.log_search.find_logs`), but for its own
    launch logs and a JSON-lines file whose rows carry no step (a data file)."""
    return [f.path for f in search_logs(work_dir) if _LAUNCH_LOGS not in f.path.relative_to(work_dir).parts[:1]
            and (f.kind != JSONL or _has_step_rows(f.path))]


def _has_step_rows(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as handle:
            first = next((line for line in handle if line.strip()), "")
        row = json.loads(first) if first else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(row, dict) and ("step" in row or "_step" in row or isinstance(row.get("data"), dict))


def _read(log: Path, fmt: str) -> Trace:
    trace = read_trace(log, fmt)
    if not trace.metrics:
        raise UsageError(f"init: {log}: the log has rows but no numeric metric; nothing written")
    return trace


def init_case(options: InitOptions) -> InitOutcome:
    """Run (or read) once, propose, and write the case and the baseline spec; see the module docstring."""
    found = existing(options)
    if found is not None:
        return found
    made = make_folders(options.cases_dir, options.baselines_dir)  # before the run: a bad folder costs no run
    try:
        return _init_in(options)
    except BaseException:
        remove_empty(made)
        raise


def _init_in(options: InitOptions) -> InitOutcome:
    # the spec is read before the run: a wrong PATH:CASE must not cost a run
    reading = import_spec(options.framework_spec, Path.cwd()) if options.framework_spec else None
    wall_s = None
    work_dir = None
    if options.log is not None:
        log = options.log.resolve()
        if not log.exists():
            raise UsageError(f"--log: {options.log}: no such file or folder; pass the metric log a run wrote")
    else:
        work_dir, wall_s = _run_once(options)
        logs = find_logs(work_dir)
        if not logs:
            raise UsageError(f"init: {shlex.join(options.command)}: exited 0 after {wall_s:.0f} s but wrote no "
                             f"metric log in its work folder {work_dir} (looked for: {'; '.join(looked_for())}); "
                             "pass {work_dir} to the trainer's logger, or "
                             "give --log PATH")
        if len(logs) > 1:
            _say(options, f"found {len(logs)} metric logs; taking {logs[0]} (others: "
                          f"{', '.join(str(p) for p in logs[1:4])})")
        log = logs[0]
    trace = _read(log, options.format)
    proposal = propose(trace, options.preset)
    if reading is not None and reading.spec is not None:
        proposal = with_spec_checks(proposal, spec_checks(reading.spec), reading.spec.where)
    if not proposal.gates:
        raise UsageError(f"init: {log}: no metric has a role init gates ({proposal.roles_line}); nothing written; "
                         "pass --preset, or write the baseline's checks by hand")
    log_format = trace.format
    case_path = options.cases_dir / f"{options.name}.yaml"
    baseline_path = options.baselines_dir / f"{options.name}.yaml"
    tracker_path = _tracker_path(log, work_dir, options.command)
    case_text = case_yaml(options, proposal, log_format, tracker_path, baseline_path, case_path, wall_s)
    provenance = {"produced_by": PRODUCED_BY_INIT, "date": dt.datetime.now(dt.timezone.utc).isoformat(
        timespec="seconds"), "command": shlex.join(options.command), "log": str(log),
        "roles": proposal.roles_line, **({"framework_spec": reading.provenance()} if reading is not None else {})}
    spec = baseline_spec(options.name, baseline_path, proposal, provenance, runs=len(CALIBRATION_SEEDS))
    write_atomic(baseline_path, baseline_yaml(spec, header=(
        f"Proposed by rl-autotest init from one run: every threshold is a placeholder (an ERROR on any run) until "
        f"`rl-autotest calibrate {options.name}` measures the noise and `rl-autotest baseline promote "
        f"{options.name}` installs it.")))
    write_atomic(case_path, case_text)
    load_baseline(baseline_path)  # what was written reads back (a bug here must not hide until calibrate)
    return InitOutcome(case_path, baseline_path, True, proposal, log, log_format, wall_s)


def make_folders(*folders: Path) -> list[Path]:
    """Create every folder, or none: one that cannot be made is one line, and the ones made for it are removed
    (no empty cases folder is left beside a baselines folder that could not be created). Returns those made."""
    made: list[Path] = []
    for folder in folders:
        missing = [p for p in (folder, *folder.parents) if not p.exists()]
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            remove_empty([*made, *missing])
            raise UsageError(f"init: {folder}: cannot create the folder ({exc.strerror or exc}); nothing run or "
                             "written; choose a folder you can write to") from None
        made.extend(missing)
    return made


def remove_empty(folders: Sequence[Path]) -> None:
    """Remove the folders that are still empty, deepest first."""
    for path in sorted(set(folders), key=lambda p: len(p.parts), reverse=True):
        try:
            path.rmdir()
        except OSError:
            pass


def _tracker_path(log: Path, work_dir: Path | None, command: Sequence[str]) -> str:
    """Where each run of the case writes its log: under ``{work_dir}`` as this run did; for ``--log``, the
    file's name under ``{work_dir}`` when the command takes one (else the path as given)."""
    if work_dir is not None:
        try:
            inside = log.relative_to(work_dir.resolve())
        except ValueError:
            pass
        else:  # TensorBoard folders are named per run (runs/<date>_<host>): keep the top one, read recursively
            return "{work_dir}/" + (inside.parts[0] if log.is_dir() else inside.as_posix())
    if any("{work_dir}" in word for word in command):
        return "{work_dir}/" + log.name
    return str(log)


def _yaml_list(words: Sequence[str]) -> str:
    return "[" + ", ".join(json.dumps(w) for w in words) + "]"


def case_yaml(options: InitOptions, proposal: Proposal, log_format: str, tracker_path: str, baseline_path: Path,
              case_path: Path, wall_s: float | None) -> str:
    """The case file's text, with comments saying where each value came from."""
    takes_seed = any("{seed}" in w for w in options.command)
    timeout_s = max(300, int(round((wall_s or 60) * 5, -1)))
    baseline = Path(os.path.relpath(baseline_path, case_path.parent)).as_posix() if options.baseline_key else None
    roles = sorted({r.role for r in proposal.rows if r.checks and r.role})
    measured = f"{proposal.expected_steps} steps in {wall_s:.0f} s here" if wall_s is not None else \
        f"{proposal.expected_steps} steps (read from {options.log})"
    goal = f"Keep {', '.join(roles)} within the calibrated seed-to-seed noise of the golden baseline."
    checked_here = "" if options.log is None else "  # from --log: check each run writes it here"
    lines = [
        f"# Written by rl-autotest init from one run ({measured}); review it, then",
        f"#   rl-autotest calibrate {options.name}      (runs it {len(CALIBRATION_SEEDS)} times, measures the noise)",
        f"#   rl-autotest baseline promote {options.name}",
        f"name: {options.name}",
        f"description: {json.dumps(' '.join(options.command) + ' checked against its calibrated baseline')}",
        f"markers: [{options.marker}]",
        f"goal: {json.dumps(goal)}",
        f"minimal_scale: {json.dumps('One run as init measured it: ' + measured + '.')}",
        "platform:",
        "  gpus: 0",
        "  framework: null",
        "launch:",
        f"  command: {_yaml_list(options.command)}",
        f"  timeout_s: {timeout_s}  # 5x the wall time init measured",
        "tracker:",
        f"  format: {log_format}",
        f"  path: {json.dumps(tracker_path)}{checked_here}",
        "expected:",
        f"  steps: {proposal.expected_steps}",
    ]
    lines += [f"baseline: {baseline}"] if baseline else ["# baseline: the project's <baselines>/<name>.yaml"]
    if options.framework_spec:
        path, _, name = options.framework_spec.rpartition(":")
        lines += ["# the framework's own spec the baseline's checks came from; once the case runs in the",
                  "# framework's checkout (platform.framework, or the project's), let it follow that spec at each",
                  "# commit under test:",
                  f"# framework_spec: {{path: {path}, case: {name}, mode: follow}}"]
    if takes_seed:
        lines += ["seed:  # gating runs use a seed the calibration runs did not",
                  f"  default: {DEFAULT_SEED}", f"  calibration: [{', '.join(str(s) for s in CALIBRATION_SEEDS)}]"]
    else:
        lines += ["# the command takes no {seed}: calibration repeats the same run (only nondeterminism is measured)"]
    return "\n".join(lines) + "\n"
