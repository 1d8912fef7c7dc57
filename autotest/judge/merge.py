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
        #: step -> [(row number, its keys, a digest of its exact content)]
        self._rows: dict[int, list[tuple[int, frozenset[str], int]]] = {}
        self._copies: list[tuple[int, int]] = []  # (copy's number, original's number)
        self._relogged: list[tuple[int, int, int]] = []  # (step, earlier number, later number)

    def admit(self, step: int, values: Mapping[str, object], number: int, digest: int,
              stored: Mapping[str, Mapping[int, float]]) -> bool:
        """Whether the row is to be stored (False: an exact copy). Raises on a conflicting re-log.

        ``stored`` holds the values kept so far (metric -> step -> value); common metrics not kept
        there (a comparison keeps only the checked ones) cannot conflict.
        """
        keys = frozenset(values) - self.ignored
        earlier = self._rows.get(step)
        if earlier is None:
            self._rows[step] = [(number, keys, digest)]
            return True
        for first, first_keys, first_digest in earlier:
            if first_digest == digest and first_keys == keys:
                self._copies.append((number, first))
                return False
        for first, first_keys, _ in earlier:
            common = keys & first_keys
            if not common:
                continue
            for key in sorted(common):
                old = stored.get(key, {}).get(step)
                new = values[key]
                if old is None or type(new) not in (int, float) or same_value(old, float(new)):  # type: ignore[arg-type]
                    continue
                raise UsageError(
                    f"{self.where(number)}: step {step} logged again with a different {key}: "
                    f"{float(new):.6g} there, {old:.6g} at {self.label(first)} (more than {RESUME_REL_TOL:.1%} apart): a resumed run re-did the step differently and "
                    "either row could be the run's; remove the stale rows (or judge each part of the run "
                    "separately)")
            self._relogged.append((step, first, number))
            break
        earlier.append((number, keys, digest))
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
