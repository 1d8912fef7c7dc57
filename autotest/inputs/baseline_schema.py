"""The baseline file's keys, declared once: type, default, range, enumeration, cross-field rules and help.

Everything else follows from :data:`KEYS` and :data:`RULES`:

- the loader (:mod:`autotest.inputs.baseline`, :mod:`autotest.inputs.paired_section`) takes each section's allowed
  and required keys from :func:`keys_of` and reads each plain value with :func:`read`, whose error is the one line
  ``<file>: <dotted.key>: <problem>; <what to do>`` with the declared fix;
- the writer (:mod:`autotest.inputs.baseline_writer`) writes each section's keys in the declared order
  (:func:`in_order`);
- the key table of docs/baselines.md is generated from it (:mod:`autotest.inputs.baseline_docs`; a test fails
  when the page is stale);
- tests/fuzz/test_baseline_schema.py generates bad values for every declared key, so a key added here is fuzzed
  the day it is added.

A plain table of dataclasses, not a schema library: pydantic (installed with transformers) costs ≈ 0.5 s to import,
more than the whole ``compare`` start-up target (docs/benchmarks.md); this module costs nothing measurable and keeps
the harness's own one-line errors (docs/baselines.md, "The declaration").

A path is dotted from the file's top: ``calibration.runs``; ``[]`` is every item of a list: ``checks[].metric``.
The keys a check kind adds (``percentile``, ``window``, ...) are declared by the kind (:mod:`autotest.scopes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autotest.inputs.baseline_model import (
    DEFAULT_RELATIVE_FLOOR,
    METHODS,
    OPERATORS,
    PLACEHOLDER,
    SCHEMA_VERSION,
    SEVERITIES,
    CalibrationSpec,
)
from autotest.inputs.aa_nudge import FORMS as NUDGE_FORMS, nudge_problem
from autotest.inputs.schema import _MISSING, Section
from autotest.scopes import BUILTIN

#: value kinds: a plain value :func:`read` validates, or a structure its own parser reads
SCALARS = ("integer", "number", "boolean", "choice", "text", "nudge")
STRUCTURES = ("section", "list", "mapping", "steps")


@dataclass(frozen=True)
class Key:
    """One key of the baseline file."""

    path: str
    kind: str
    help: str
    required: bool = False
    #: the value when absent (None: absent means "not set")
    default: Any = None
    #: the default as the docs say it, when the loader computes it (``name``: the file name)
    shown: str | None = None
    #: inclusive lower bound; ``positive``: above 0
    minimum: float | None = None
    positive: bool = False
    #: exclusive upper bound (a probability is below 1)
    below: float | None = None
    choices: tuple[str, ...] = ()
    #: what to do, after the problem in the error line
    fix: str = ""
    #: a text the value may also be instead of its kind (``threshold: placeholder``)
    also: str | None = None

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[-1]

    @property
    def section(self) -> str:
        return self.path.rsplit(".", 1)[0] if "." in self.path else ""

    def range_text(self) -> str:
        """Allowed values, for the docs."""
        parts = []
        if self.choices:
            parts.append(" \\| ".join(f"`{c}`" for c in self.choices))
        if self.positive:
            parts.append("> 0")
        if self.minimum is not None:
            parts.append(f">= {self.minimum:g}")
        if self.below is not None:
            parts.append(f"< {self.below:g}")
        if self.also:
            parts.append(f"or `{self.also}`")
        if self.kind == "nudge":
            parts.append(NUDGE_FORMS.replace("|", "\\|"))
        return ", ".join(parts)


@dataclass(frozen=True)
class Rule:
    """A rule across keys: what it says, and the keys it ties (the first is where its error points)."""

    keys: tuple[str, ...]
    help: str
    #: the keys are alternatives: exactly one is given
    one_of: bool = False


_CAL = CalibrationSpec()
_BUDGET_FIX = "write a probability between 0 and 1, e.g. 0.05"

#: every key of a baseline file, each section's keys in the order the writer writes them
KEYS: tuple[Key, ...] = (
    Key("schema_version", "integer", f"the file format; this rl-autotest reads {SCHEMA_VERSION}",
        default=SCHEMA_VERSION, fix="write a whole number"),
    Key("name", "text", "the case's baseline name", shown="the file name without .yaml"),
    Key("description", "text", "one paragraph for the report", default=""),
    Key("golden", "section", "the golden values: exactly one of table and tracker", required=True),
    Key("golden.table", "mapping", "metric -> {step: value}"),
    Key("golden.tracker", "text", "a reference metric log; ${ENV} expanded, relative to this file"),
    Key("golden.format", "text", "the reference log's format (auto, or any format of Metric logs)", default="auto"),
    Key("golden.tracker_sha256", "text", "the reviewed reference log's sha256 (64 lowercase hex digits); a different "
        "file is an ERROR"),
    Key("golden.tracker_steps", "integer", "the reference log's number of training steps (checked with the hash)",
        minimum=1, fix="write the tracker's number of training steps"),
    Key("golden.noise", "mapping", "metric -> {step: sd}: calibrated seed-to-seed standard deviation (scope pooled)"),
    Key("golden.roughness", "mapping", "metric -> the calmest calibration run's step-to-step roughness"),
    Key("metric_aliases", "mapping", "name in this baseline -> name as logged", default={}),
    Key("short_names", "mapping", "short -> metric: display names in reports", default={}),
    Key("preset", "text", "the framework's log vocabulary (xtuner, verl, slime, trl, nemo-rl)",
        shown="inferred from the metric names"),
    Key("roles", "mapping", "metric -> role (reward, eval, mismatch, step_time, ...)", default={}),
    Key("steps", "section", "how many training steps a run must have"),
    Key("steps.expected", "integer", "the number of training steps", required=True, minimum=1,
        fix="write the number of training steps, e.g. 45"),
    Key("steps.exact", "boolean", "a run with more steps is an error too", default=False),
    Key("calibrated_range", "steps", "[first, last]: later steps are reported as INFO \"uncalibrated\""),
    Key("wall_time", "section", "the longest a run may take"),
    Key("wall_time.max_s", "number", "seconds", required=True, positive=True, fix="write seconds, e.g. 2400"),
    Key("wall_time.overrides", "list", "per-hardware limits: [{hardware: {gpu, count}, max_s}]"),
    Key("wall_time.overrides[].hardware", "section", "the nodes it applies to", required=True),
    Key("wall_time.overrides[].hardware.gpu", "text", "words of the GPU model as nvidia-smi -L shows it (H200 matches "
        "\"NVIDIA H200\", not \"NVIDIA H20\")", required=True),
    Key("wall_time.overrides[].hardware.count", "integer", "the node's GPU count (absent: any count)", minimum=1,
        fix="write the node's GPU count, e.g. 8"),
    Key("wall_time.overrides[].max_s", "number", "the limit on that hardware, seconds", required=True, positive=True,
        fix="write a number, e.g. max_s: 15"),
    Key("calibration", "section", "how `rl-autotest calibrate` turns N runs into thresholds"),
    Key("calibration.runs", "integer", "default number of runs (--runs overrides)", default=_CAL.runs, minimum=2,
        fix="write 2 or more (run-to-run noise needs two runs)"),
    Key("calibration.margin", "number", "x the measured max run-to-run deviation", default=_CAL.margin, minimum=1,
        fix="write 1 or more (a margin below 1 flags the calibration runs themselves)"),
    Key("calibration.relative_floor", "number", "a relative threshold is never below it; an absolute one never below "
        "it x max |golden|", default=_CAL.relative_floor, minimum=0, fix="write a fraction >= 0, e.g. 0.01"),
    Key("calibration.binomial_z", "number", "z of the binomial floor for eval metrics with a known eval-set size",
        default=_CAL.binomial_z, positive=True, fix="write e.g. 2"),
    Key("calibration.false_alarm_budget", "number", "chance per clean run that any pooled gate false-alarms, split "
        "over them", default=_CAL.false_alarm_budget, positive=True, below=1, fix=_BUDGET_FIX),
    Key("calibration.floor_headroom", "number", "a declared floor never exceeds this many times the case's own level",
        default=_CAL.floor_headroom, minimum=1, fix="write a factor >= 1, e.g. 1000"),
    Key("calibration.floors", "mapping", "metric -> absolute floor, in the units of its checks", default={}),
    Key("calibration.eval_set_size", "mapping", "eval metric -> number of eval items (the binomial floor)",
        default={}),
    Key("checks", "list", "a non-empty list of checks, at least one a gate", required=True),
    Key("checks[].metric", "text", "the metric checked (as named in this baseline)", required=True),
    Key("checks[].method", "choice", "how the error is measured", required=True, choices=METHODS),
    Key("checks[].operator", "choice", "pass when error OPERATOR threshold", required=True, choices=OPERATORS),
    Key("checks[].threshold", "number", "the bound; `placeholder` until `rl-autotest calibrate` sets it",
        required=True, also=PLACEHOLDER, fix=f"write a number, e.g. 0.05 (unquoted), or {PLACEHOLDER} until "
                                              "rl-autotest calibrate sets it"),
    Key("checks[].scope", "choice", "the check kind (a plugin may add more; its keys are its own)",
        default="stepwise", choices=BUILTIN),
    Key("checks[].severity", "choice", "gate: may fail the run; shadow: judged and recorded, never failing; "
        "reference: INFO", default="gate", choices=SEVERITIES),
    Key("checks[].relative_floor", "number", "method relative: |base| below this counts as this",
        default=DEFAULT_RELATIVE_FLOOR, positive=True, fix="write a small positive number, e.g. 1.0e-12"),
    Key("checks[].measured_max_deviation", "number", "written by calibrate", minimum=0,
        fix="write the measured deviation (>= 0) or remove it"),
    Key("checks[].derivation", "text", "how the threshold was made (written by calibrate)", default=""),
    Key("checks[].overrides", "list", "per-hardware thresholds: [{hardware: {gpu, count}, threshold}]"),
    Key("checks[].overrides[].hardware", "section", "the nodes it applies to", required=True),
    Key("checks[].overrides[].hardware.gpu", "text", "words of the GPU model as nvidia-smi -L shows it (H200 matches "
        "\"NVIDIA H200\", not \"NVIDIA H20\")", required=True),
    Key("checks[].overrides[].hardware.count", "integer", "the node's GPU count (absent: any count)", minimum=1,
        fix="write the node's GPU count, e.g. 8"),
    Key("checks[].overrides[].threshold", "number", "the threshold on that hardware (its sign checked as the "
        "default's)", required=True,
        fix="write a number, e.g. threshold: 15"),
    Key("paired", "section", "the A/A-measured noise A/B gates judge by (`rl-autotest calibrate --paired`)"),
    Key("paired.pairs", "integer", "A/A pairs measured", required=True, minimum=2,
        fix="write 2 or more (paired noise needs two A/A pairs)"),
    Key("paired.perturbation", "nudge", "how each pair's second run was nudged (docs/ab.md, \"The nudge\"); "
        "`calibrate --paired` keeps it, `--perturbation` changes it", required=True,
        fix="write one of " + NUDGE_FORMS),
    Key("paired.seeds", "list", "the seeds the pairs ran, each once", default=()),
    Key("paired.false_alarm_budget", "number", "chance per clean A/B that any paired gate false-alarms, split over "
        "the windows", default=0.05, positive=True, below=1, fix=_BUDGET_FIX),
    Key("paired.relative_floor", "number", "a threshold never falls below this share of the window's level",
        default=0.01, minimum=0, fix="write a fraction >= 0, e.g. 0.01"),
    Key("paired.windows", "list", "one paired gate per window", required=True),
    Key("paired.windows[].metric", "text", "a checked metric", required=True),
    Key("paired.windows[].steps", "steps", "[start, end] of the window", required=True),
    Key("paired.windows[].noise", "number", "the A/A noise of the window mean", required=True, minimum=0,
        fix="write the A/A noise, >= 0"),
    Key("paired.windows[].level", "number", "the window's mean level in the A/A runs", required=True,
        fix="write the window's mean level"),
    Key("paired.windows[].floor", "number", "the metric's declared floor", default=0.0, minimum=0,
        fix="write a floor >= 0"),
    Key("provenance", "mapping", "free-form, written by calibrate: date, commit, runs, versions, hardware",
        default={}),
)

#: rules across keys (each enforced where its section is read; the docs list them under the key table)
RULES: tuple[Rule, ...] = (
    Rule(("golden.table", "golden.tracker"), "exactly one of golden.table and golden.tracker", one_of=True),
    Rule(("golden.tracker_sha256", "golden.tracker"), "tracker_sha256 pins golden.tracker (not a table)"),
    Rule(("checks",), "at least one check is severity: gate; check ids are unique"),
    Rule(("checks[].threshold", "checks[].method", "checks[].operator"), "a distance (absolute, relative, slowdown) "
         "is never negative: a threshold that always or never passes is refused"),
    Rule(("golden.table", "checks[].metric"), "every golden metric has a check; every checked metric (but method "
         "value) has golden values"),
    Rule(("paired.windows[].metric", "checks[].metric"), "a paired window's metric has a check"),
    Rule(("paired.windows[].steps", "steps.expected"), "windows of one metric are disjoint; none ends past the last "
         "step (steps.expected, golden.tracker_steps, else the golden table's last step)"),
    Rule(("paired.seeds",), "each seed once"),
)

BY_PATH: Mapping[str, Key] = {k.path: k for k in KEYS}


def keys_of(section: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(required, optional) key names of ``section`` (``""`` the top, ``checks[]`` a check), in declared order."""
    inside = [k for k in KEYS if k.section == section]
    return tuple(k.name for k in inside if k.required), tuple(k.name for k in inside if not k.required)


def allowed(section: str) -> tuple[str, ...]:
    """Every key name of ``section``, in the declared (written) order."""
    return tuple(k.name for k in KEYS if k.section == section)


def check_section(sec: Section, section: str, extra: tuple[str, ...] = ()) -> None:
    """Unknown keys (did-you-mean) and missing required ones of ``sec``, from the declaration (``extra``: keys a
    check kind adds)."""
    required, optional = keys_of(section)
    sec.check_keys(required=required, optional=optional + extra)


def read(sec: Section, path: str) -> Any:
    """The value of the declared plain key ``path`` in ``sec`` (its section), validated as declared; absent: its
    default when optional (None when it has none). A mistake is one line naming the dotted key and the fix."""
    key = BY_PATH[path]
    name = key.name
    if name not in sec.data and not key.required:
        return key.default
    default = _MISSING  # present (or required): validated as written
    if key.kind == "integer":
        return sec.integer(name, minimum=key.minimum, fix=key.fix or "write a whole number", default=default)
    if key.kind == "number":
        minimum = None if key.minimum is None else float(key.minimum)
        value = sec.number(name, fix=key.fix or "write a number", positive=key.positive, minimum=minimum,
                           default=default)
        if key.below is not None and value >= key.below:
            sec.fail_at_line(name, f"{value:g} is not below {key.below:g}", key.fix)
        return value
    if key.kind == "boolean":
        return sec.boolean(name, default=default)
    if key.kind == "choice":
        return sec.choice(name, key.choices, default=default)
    if key.kind == "text":
        return sec.text(name)
    if key.kind == "nudge":
        value = sec.text(name)
        problem = nudge_problem(value)
        if problem:
            sec.fail_at_line(name, problem, key.fix)
        return value.strip()
    raise ValueError(f"{path} is a {key.kind}: read by its own parser")


def in_order(doc: Mapping[str, Any], section: str, others_after: str | None = None) -> dict[str, Any]:
    """``doc`` (one section as written) with its declared keys in the declared order; keys not declared here (a
    check kind's) right after ``others_after``, else at the end, in the order they came."""
    names = allowed(section)
    order: dict[str, float] = {name: i for i, name in enumerate(names)}
    rest = order[others_after] + 0.5 if others_after in order else len(names)
    return dict(sorted(doc.items(), key=lambda item: order.get(item[0], rest)))
