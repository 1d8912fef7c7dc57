"""The framework's own accuracy spec for a case, read from its repository: xtuner's ``autotest/config.yaml``.

Pure reading: YAML text in (already taken from the commit under test by :mod:`autotest.run.framework_spec_read`),
one frozen :class:`FrameworkSpec` out. What is read, as xtuner's own CI reads it (verified at xtuner main
``b934f462``, ``autotest/utils/common_utils.py`` and ``autotest/utils/check_metric.py``)::

    default_config: {train: {resource: {envs: [K=V, ...]}}}      the envs a step without its own inherit
    case:
      <case>:                    a list of steps (phases: first, resume); each step:
        - type: rl               only rl steps carry a check_metrics list (sft steps use a mapping)
          phase: str             optional; names the step when the case has several
          resource: {envs: [K=V, ...]}          replaces default_config's list (a list is not merged)
          assert_info:
            base_metric: str     the golden tracker, relative to xtuner's baseline store
            check_metrics:       each {metric, method, operator, threshold, aggregate?}
          timeout: number        seconds for the whole task

Methods ``absolute``, ``relative``, ``slowdown`` (``max(0, cur - base)``) and ``value`` (the current value itself);
operators ``<`` and ``<=``. ``check_rl_result`` aggregates ``response/rewards/mean`` and
``response/response_len/mean`` with their 80th percentile unless the check gives ``aggregate`` itself
(:data:`PERCENTILE_DEFAULTS`); every other check is per step, each error rounded to 5 decimals first.

Every mistake is one ``UsageError("<file>@<sha>: <dotted key>: <problem>; <what to do>")``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from autotest.errors import UsageError

#: what xtuner's check_rl_result reads (b934f462)
SPEC_METHODS = ("absolute", "relative", "slowdown", "value")
SPEC_OPERATORS = ("<", "<=")
#: metric -> the percentile check_rl_result aggregates it with when the check names none (RL_PERCENTILE_METRICS)
PERCENTILE_DEFAULTS: Mapping[str, int] = MappingProxyType({"response/response_len/mean": 80,
                                                           "response/rewards/mean": 80})
#: decimals check_rl_result rounds a per-step error to before comparing it
ROUNDED_DECIMALS = 5
_FIX = "fix it in the framework's spec, or set framework_spec.mode: own in the case"
#: what was found of a spec at a commit (SpecReading.provenance, SpecComparison.state)
COMPARED, ABSENT, UNREAD = "compared", "absent", "unread"


@dataclass(frozen=True)
class SpecCheck:
    """One entry of ``assert_info.check_metrics``."""

    metric: str
    method: str
    operator: str
    threshold: float
    #: the percentile its per-step errors are aggregated with (None: judged per step)
    percentile: int | None = None
    #: True when the percentile is check_rl_result's default for the metric, not written in the spec
    percentile_by_default: bool = False

    def describe(self) -> str:
        """``value < 0.001 per step``, ``absolute < 0.1, p80 of per-step errors``."""
        if self.percentile is None:
            how = "per step"
        else:
            how = f"p{self.percentile} of per-step errors" + (" (the checker's default)" * self.percentile_by_default)
        return f"{self.method} {self.operator} {self.threshold:g}, {how}"


@dataclass(frozen=True)
class FrameworkSpec:
    """The spec of one case (one step of it) as the framework's repository holds it at one commit."""

    #: ``autotest/config.yaml@<sha>``: where it was read
    where: str
    case: str
    checks: tuple[SpecCheck, ...]
    #: every ``K=V`` the step runs with (its own list, else default_config's)
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float | None = None
    base_metric: str | None = None
    phase: str | None = None

    @property
    def settings(self) -> dict[str, str]:
        """The env entries that set behaviour (``XTUNER_DETERMINISTIC=true``): not the absolute paths on the
        spec's own cluster (``MODEL_PATH=/mnt/...``), which a case's ``inputs`` stand for."""
        return {k: v for k, v in self.env.items() if not v.startswith("/")}

    @property
    def cluster_paths(self) -> dict[str, str]:
        return {k: v for k, v in self.env.items() if v.startswith("/")}


def _fail(where: str, key: str, problem: str, fix: str = _FIX) -> UsageError:
    return UsageError(f"{where}: {key}: {problem}; {fix}")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_spec(document: Any, where: str, case: str, phase: str | None = None) -> FrameworkSpec | None:
    """The spec of ``case`` in the parsed ``document``; None when the file has no such case (stated by the
    caller, never an error: the framework may not have it yet at this commit)."""
    if not isinstance(document, dict):
        raise _fail(where, "(file)", f"{_show(document)} is not a mapping")
    cases = document.get("case")
    if not isinstance(cases, dict):
        raise _fail(where, "case", "missing or not a mapping of case names")
    if case not in cases:
        return None
    steps = cases[case]
    if not isinstance(steps, list) or not steps:
        raise _fail(where, f"case.{case}", f"{_show(steps)} is not a non-empty list of steps")
    index = _pick_step(steps, where, case, phase)
    step = steps[index]
    key = f"case.{case}[{index}]"
    if step.get("type") != "rl":
        raise _fail(where, f"{key}.type", f"{_show(step.get('type'))} is not rl; only rl steps carry a "
                    "check_metrics list the harness reads", "name an rl case in framework_spec.case")
    assert_info = step.get("assert_info")
    if not isinstance(assert_info, dict):
        raise _fail(where, f"{key}.assert_info", f"{_show(assert_info)} is not a mapping")
    raw = assert_info.get("check_metrics")
    if not isinstance(raw, list) or not raw:
        raise _fail(where, f"{key}.assert_info.check_metrics", f"{_show(raw)} is not a non-empty list of checks")
    checks = tuple(_check(item, where, f"{key}.assert_info.check_metrics[{i}]") for i, item in enumerate(raw))
    base = assert_info.get("base_metric")
    if base is not None and not isinstance(base, str):
        raise _fail(where, f"{key}.assert_info.base_metric", f"{_show(base)} is not a path")
    env = _env(document, step, where, key)
    timeout = step.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not math.isfinite(timeout) or timeout <= 0):
        raise _fail(where, f"{key}.timeout", f"{_show(timeout)} is not a positive number of seconds")
    return FrameworkSpec(where=where, case=case, checks=checks, env=MappingProxyType(env),
                         timeout_s=float(timeout) if timeout is not None else None, base_metric=base,
                         phase=step.get("phase"))


def _pick_step(steps: list, where: str, case: str, phase: str | None) -> int:
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            raise _fail(where, f"case.{case}[{i}]", f"{_show(step)} is not a mapping")
    if phase is not None:
        found = [i for i, s in enumerate(steps) if s.get("phase") == phase]
        if not found:
            phases = ", ".join(str(s.get("phase")) for s in steps)
            raise _fail(where, f"case.{case}", f"no step with phase {phase!r} (phases: {phases})",
                        "set framework_spec.phase to one of them")
        return found[0]
    if len(steps) > 1:
        phases = ", ".join(str(s.get("phase")) for s in steps)
        raise _fail(where, f"case.{case}", f"{len(steps)} steps (phases: {phases})",
                    "set framework_spec.phase in the case to the one it runs")
    return 0


def _check(item: Any, where: str, key: str) -> SpecCheck:
    if not isinstance(item, dict):
        raise _fail(where, key, f"{_show(item)} is not a mapping")
    for name in ("metric", "method", "operator", "threshold"):
        if name not in item:
            raise _fail(where, f"{key}.{name}", "required key is missing")
    metric = item["metric"]
    if not isinstance(metric, str) or not metric.strip():
        raise _fail(where, f"{key}.metric", f"{_show(metric)} is not a metric name")
    for name, allowed in (("method", SPEC_METHODS), ("operator", SPEC_OPERATORS)):
        if item[name] not in allowed:
            raise _fail(where, f"{key}.{name}", f"{_show(item[name])} is not one of {', '.join(allowed)}")
    threshold = item["threshold"]
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
        raise _fail(where, f"{key}.threshold", f"{_show(threshold)} is not a finite number")
    aggregate = item.get("aggregate")
    if aggregate is not None and (isinstance(aggregate, bool) or not isinstance(aggregate, (int, float))
                                  or not 0 <= aggregate <= 100):
        raise _fail(where, f"{key}.aggregate", f"{_show(aggregate)} is not a percentile between 0 and 100")
    default = PERCENTILE_DEFAULTS.get(metric.strip()) if aggregate is None else None
    return SpecCheck(metric=metric.strip(), method=item["method"], operator=item["operator"],
                     threshold=float(threshold), percentile=int(aggregate) if aggregate is not None else default,
                     percentile_by_default=default is not None)


def _env(document: dict, step: dict, where: str, key: str) -> dict[str, str]:
    """The step's ``resource.envs``, else default_config.train's: xtuner merges dicts, and a list replaces."""
    own = (step.get("resource") or {}).get("envs") if isinstance(step.get("resource"), dict) else None
    if own is not None:
        return _env_list(own, where, f"{key}.resource.envs")
    default = document.get("default_config")
    train = default.get("train") if isinstance(default, dict) else None
    resource = train.get("resource") if isinstance(train, dict) else None
    envs = resource.get("envs") if isinstance(resource, dict) else None
    return _env_list(envs, where, "default_config.train.resource.envs") if envs is not None else {}


def _env_list(raw: Any, where: str, key: str) -> dict[str, str]:
    if not isinstance(raw, list):
        raise _fail(where, key, f"{_show(raw)} is not a list of NAME=value")
    env: dict[str, str] = {}
    for i, entry in enumerate(raw):
        if not isinstance(entry, str) or "=" not in entry or not entry.split("=", 1)[0].strip():
            raise _fail(where, f"{key}[{i}]", f"{_show(entry)} is not NAME=value")
        name, value = entry.split("=", 1)
        env[name.strip()] = value.strip()
    return env
