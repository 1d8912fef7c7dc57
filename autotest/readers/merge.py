"""What a second row at the same step means, decided once for every row-based reader.

A tracker may write several rows at one step. By their keys they are one of:

- **another kind of row** (no metric in common with the step's earlier rows: xtuner's eval row beside
  its step-summary row; the Hugging Face Trainer's train row, eval row and final summary at one
  ``global_step``): the rows merge, silently;
- **an exact copy** of an earlier row (a tracker that writes every row twice): dropped, and the file
  gets ONE warning with the count;
- **a re-log** (metrics in common: a resumed run re-did the step): when every common value agrees
  with the earlier one within :data:`RESUME_REL_TOL`, the later row wins and the file gets one
  warning listing the steps; when a value differs beyond it, the log cannot be judged (which row is
  the run's?) and reading stops with one error naming both lines.

Bookkeeping keys (``ignored``, e.g. the Trainer's ``epoch`` on every row) do not make rows "in common".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping

from autotest.errors import UsageError

#: a re-logged value within this relative distance of the earlier one is the same measurement
RESUME_REL_TOL = 1e-3
RESUME_ABS_TOL = 1e-9
#: steps listed by name in a warning before "and N more"
_LISTED = 5


def same_value(a: float, b: float) -> bool:
    """Whether a re-logged value is the same measurement as the earlier one (NaN equals NaN)."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=RESUME_REL_TOL, abs_tol=RESUME_ABS_TOL)


class StepRows:
    """Tracks the rows seen at each step of one file and classifies each new one (see the module doc)."""

    def __init__(self, path: object, ignored: Collection[str] = (),
                 label: Callable[[int], str] = "line {}".format) -> None:
        self.path = path
        #: ``label(number)``: how a row is named in messages ("line 12", "log_history[11]")
        self.label = label
        #: a message's prefix: ``path:line`` for a line-based log, ``path: log_history[i]`` otherwise
        self.where = (lambda n: f"{path}:{n}") if label("") == "line " else (lambda n: f"{path}: {label(n)}")
        self.ignored = frozenset(ignored)
        #: every metric name seen (a row's names are added once per distinct key layout)
        self.names: set[str] = set()
        self._layouts: set[int] = set()
        #: step -> [(row number, a hash of its key layout, a digest of its exact content)]
        self._rows: dict[int, list[tuple[int, int, int]]] = {}
        self._copies: list[tuple[int, int]] = []  # (copy's number, original's number)
        self._relogged: list[tuple[int, int, int]] = []  # (step, earlier number, later number)

    def layout(self, values: Mapping[str, object]) -> int:
        """A hash of the row's keys in order (cheaper than a set: rows carry hundreds); notes new names."""
        layout = hash(tuple(values) if not self.ignored else tuple(k for k in values if k not in self.ignored))
        if layout not in self._layouts:
            self._layouts.add(layout)
            self.names.update(values)
        return layout

    def admit(self, step: int, values: Mapping[str, object], number: int, digest: int,
              stored: Mapping[str, Mapping[int, float]], layout: int | None = None) -> bool:
        """Whether the row is to be stored (False: an exact copy). Raises on a conflicting re-log.

        A later row is a re-log when it has the key layout of an earlier row at the step, or a value
        at the step is already stored for one of its metrics; ``stored`` holds the values kept so far
        (metric -> step -> value): metrics not kept (a comparison keeps only the checked ones) cannot
        conflict. ``layout``: the row's :meth:`layout`, when the reader has it already.
        """
        if layout is None:
            layout = self.layout(values)
        earlier = self._rows.get(step)
        if earlier is None:
            self._rows[step] = [(number, layout, digest)]
            return True
        for first, first_layout, first_digest in earlier:
            if first_digest == digest and first_layout == layout:
                self._copies.append((number, first))
                return False
        same = next((first for first, first_layout, _ in earlier if first_layout == layout), None)
        common = [k for k in values if k not in self.ignored and step in stored.get(k, ())]
        if same is None and not common:
            earlier.append((number, layout, digest))
            return True  # another kind of row: merge
        first = same if same is not None else earlier[-1][0]
        for key in common:
            old, new = stored[key][step], values[key]
            if type(new) not in (int, float) or same_value(old, float(new)):  # type: ignore[arg-type]
                continue
            raise UsageError(
                f"{self.where(number)}: step {step} logged again with a different {key}: {float(new):.6g} there, "  # type: ignore[arg-type]
                f"{old:.6g} at {self.label(first)} (more than {RESUME_REL_TOL:.1%} apart): a resumed run re-did the "
                "step differently and either row could be the run's; remove the stale rows (or judge each part of "
                "the run separately)")
        self._relogged.append((step, first, number))
        earlier.append((number, layout, digest))
        return True

    def warnings(self) -> list[str]:
        """The file's warnings: one for exact copies (with the count), one for re-logged steps."""
        out = []
        if self._copies:
            copy, original = self._copies[0]
            out.append(f"{self.path}: {len(self._copies)} row(s) repeat an earlier row of the same step exactly "
                       f"(first: {self.label(copy)} repeats {self.label(original)}); each counted once "
                       "(does the tracker write every row twice?)")
        if self._relogged:
            listed = ", ".join(f"step {s} ({self.label(a)} and {self.label(b)})"
                               for s, a, b in self._relogged[:_LISTED])
            more = f" and {len(self._relogged) - _LISTED} more" if len(self._relogged) > _LISTED else ""
            out.append(f"{self.path}: {len(self._relogged)} step(s) logged again "
                       f"(resumed run?): {listed}{more}; the values agree within {RESUME_REL_TOL:.1%}, "
                       "the later rows win")
        return out
