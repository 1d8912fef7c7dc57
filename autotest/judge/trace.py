"""The metric trace of one run: every metric as a series keyed by its real step number."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

#: metric-name prefixes of xtuner's row kinds (every reader and the triage use these)
EVAL_PREFIX = "eval/"
MINIBATCH_PREFIX = "train_metrics/"

#: A metric series: real step number -> value. Never aligned by position.
Series = Mapping[int, float]


@dataclass(frozen=True)
class Trace:
    """Metric series of one run, read from one metric log.

    ``train_steps`` are the steps that have a step-summary row (a real RL step);
    ``eval_steps`` those that carry an eval metric (including the eval-only step 0).
    ``warnings`` are the reader's notes about what it tolerated (truncated line, resumed steps).
    """

    source: str
    series: Mapping[str, Series]
    train_steps: tuple[int, ...] = ()
    eval_steps: tuple[int, ...] = ()
    warnings: tuple[str, ...] = ()
    format: str = "xtuner"
    #: file line of each step's (last) summary or eval row, so a number can point to where it came from
    step_lines: Mapping[int, int] = field(default_factory=dict, compare=False, repr=False)
    #: metric -> (what it was logged as, e.g. "a list"; where first, e.g. "line 12" or "log_history[11]"): a value
    #: that is not a number, never dropped silently
    non_numeric: Mapping[str, tuple[str, str]] = field(default_factory=dict, compare=False, repr=False)
    #: every metric name the log carries, including those a reader was told not to keep (empty: not known)
    logged_metrics: frozenset[str] = field(default_factory=frozenset, compare=False, repr=False)
    #: steps where the log's step counter went back (a resumed or concatenated run restarted there): a slope check
    #: fits each part on its own (``autotest.scopes.slope``)
    restarts: tuple[int, ...] = field(default=(), compare=False)

    def get(self, metric: str) -> Series | None:
        return self.series.get(metric)

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(sorted(self.series))

    @property
    def last_train_step(self) -> int | None:
        return self.train_steps[-1] if self.train_steps else None

    def with_aliases(self, aliases: Mapping[str, str]) -> "Trace":
        """Expose each ``canonical: source_name`` alias under its canonical name (source kept too)."""
        series = dict(self.series)
        non_numeric = dict(self.non_numeric)
        for canonical, source_name in aliases.items():
            if canonical not in series and source_name in series:
                series[canonical] = series[source_name]
            if canonical not in non_numeric and source_name in non_numeric:
                non_numeric[canonical] = non_numeric[source_name]
        return Trace(
            source=self.source,
            series=MappingProxyType(series),
            train_steps=self.train_steps,
            eval_steps=self.eval_steps,
            warnings=self.warnings,
            format=self.format,
            step_lines=self.step_lines,
            non_numeric=MappingProxyType(non_numeric),
            logged_metrics=self.logged_metrics,
            restarts=self.restarts,
        )

    def with_warnings(self, first: tuple[str, ...]) -> "Trace":
        """The same trace with ``first`` before its own warnings (what was chosen, and why)."""
        return replace(self, warnings=tuple(first) + self.warnings)
