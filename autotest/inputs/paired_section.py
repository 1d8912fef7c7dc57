"""The baseline's ``paired:`` section, read and written: the A/A-measured noise A/B gates judge by.

    paired:
      pairs: 10                        # A/A pairs measured (same code, same seed, twice)
      perturbation: RL_AUTOTEST_AA_PERTURB=1
      seeds: [0, 1, 2, ...]
      false_alarm_budget: 0.05         # per clean A/B, over every window below
      relative_floor: 0.01             # a threshold never falls below this share of the window's level
      windows:
        - {metric: response/rewards/mean, steps: [1, 15], noise: 0.021, level: 0.34}
        - {metric: mismatch/mismatch_k3_kl, steps: [1, 15], noise: 2e-16, level: 1e-14, floor: 0.0001}

Written by ``rl-autotest calibrate CASE --paired``; what it means is in docs/ab.md. The keys and their rules are
declared in :mod:`autotest.inputs.baseline_schema`.
"""

from __future__ import annotations

from typing import Any

from autotest.inputs.baseline_model import PairedSpec, PairedWindow
from autotest.inputs.baseline_schema import check_section, keys_of, read
from autotest.inputs.schema import Section, show


def parse_paired(sec: Section, checked: set[str], last_step: int | None = None) -> PairedSpec:
    """The section as a :class:`PairedSpec`; a bad key or value is one error naming it, with its line where a rule
    spans values (a budget outside (0, 1), a seed twice, windows of one metric that overlap, a window past
    ``last_step``: the baseline's last training step, when it knows it)."""
    check_section(sec, "paired")
    raw = sec.get("windows")
    if not isinstance(raw, list) or not raw:
        sec.fail("windows", f"{show(raw)} is not a non-empty list", "write one {metric, steps: [start, end], noise, level} per "
                                                        "window, or run `rl-autotest calibrate CASE --paired`")
    windows = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        required, optional = keys_of("paired.windows[]")
        win = Section(item, sec.path, sec.key(f"windows[{i}]"), doc=sec.doc, required=required, optional=optional)
        metric = win.text("metric")
        if metric not in checked:
            win.fail("metric", f"{metric!r} has no check in this baseline",
                     "pair only checked metrics (recalibrate with `rl-autotest calibrate CASE --paired`)")
        steps = win.int_list("steps")
        if len(steps) != 2 or steps[0] > steps[1]:
            win.fail("steps", f"{list(steps)} is not [start, end] with start <= end", "write e.g. [1, 15]")
        window = PairedWindow(metric, steps[0], steps[1],
                              noise=read(win, "paired.windows[].noise"), level=read(win, "paired.windows[].level"),
                              floor=read(win, "paired.windows[].floor"))
        if window.gate_id in seen:
            win.fail_at_line("steps", f"duplicate window {window.gate_id}", "merge or remove one")
        seen.add(window.gate_id)
        windows.append(window)
    budget = read(sec, "paired.false_alarm_budget")
    seeds = sec.int_list("seeds", default=())
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        sec.fail_at_line("seeds", f"seed {twice[0]} is listed twice: each A/A pair ran one seed",
                         "list each seed once (recalibrate with `rl-autotest calibrate CASE --paired`)")
    spec = PairedSpec(
        pairs=read(sec, "paired.pairs"),
        perturbation=read(sec, "paired.perturbation"),
        windows=tuple(windows),
        false_alarm_budget=budget,
        relative_floor=read(sec, "paired.relative_floor"),
        seeds=seeds,
    )
    _check_windows(sec, spec.windows, last_step)
    return spec


def _check_windows(sec: Section, windows: tuple[PairedWindow, ...], last_step: int | None) -> None:
    """Rules across windows: one metric's windows are disjoint, and none ends past the baseline's last step."""
    for i, window in enumerate(windows):
        where = f"windows[{i}].steps"
        steps = [window.start, window.end]
        if last_step is not None and window.end > last_step:
            sec.fail_at_line(where, f"{steps} ends past the last step {last_step} of this baseline",
                             f"end the window at {last_step} or before (recalibrate with `rl-autotest calibrate "
                             "CASE --paired`)")
        other = next((w for w in windows[:i] if w.metric == window.metric and w.start <= window.end
                      and window.start <= w.end), None)
        if other is not None:
            sec.fail_at_line(where, f"{steps} overlaps {other.gate_id}: a step would count in two gates of one "
                                    "metric", "make the windows of one metric disjoint, e.g. [1, 15] and [16, 30]")


def paired_document(spec: PairedSpec, flow: type[list], flow_map: type[dict]) -> dict[str, Any]:
    """``spec`` as the mapping :func:`parse_paired` reads back (``flow``/``flow_map``: the writer's one-line types)."""
    doc: dict[str, Any] = {"pairs": spec.pairs, "perturbation": spec.perturbation}
    if spec.seeds:
        doc["seeds"] = flow(spec.seeds)
    doc["false_alarm_budget"] = spec.false_alarm_budget
    doc["relative_floor"] = spec.relative_floor
    doc["windows"] = [flow_map(metric=w.metric, steps=flow([w.start, w.end]), noise=float(f"{w.noise:.4g}"),
                               level=float(f"{w.level:.6g}"), **({"floor": w.floor} if w.floor else {}))
                      for w in spec.windows]
    return doc
