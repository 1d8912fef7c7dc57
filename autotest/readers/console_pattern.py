"""The console reader's line pattern: a preset (``verl``, ``megatron``) or a regex given in the case.

A case's ``tracker.pattern`` is checked when the case loads (:mod:`autotest.inputs.case_sections`), long before a
log is read (:mod:`autotest.readers.console`), by the engine that will run it: the ``regex`` package (``re``'s
syntax; imported only for a pattern of the user's, about 15 ms), because a user's pattern runs with a time bound
per line (:data:`MATCH_TIMEOUT_S`): a nested quantifier such as ``(a|aa)+$`` backtracks for hours on one line,
and ``re`` cannot be stopped. The presets are ours and run on ``re``.

- ``verl``: verl's console logger (``verl/utils/logger/aggregate_logger.py``, ``concat_dict_to_str``) prints
  ``step:12 - actor/pg_loss:0.123 - critic/score/mean:0.500`` (``" - "``-joined ``key:value``, numbers only);
- ``megatron``: Megatron-LM's ``training_log`` prints `` [2024-05-01 10:00:00] iteration       10/     100 |
  consumed samples:          640 | ... | lm loss: 1.234560E+00 | grad norm: 0.512 | ...`` (``|``-separated
  ``key: value``; the keys keep their spaces, e.g. ``lm loss``);
- a regex: a line it matches (``re.search``) is a metrics line; its named group ``step`` is the step and every
  other named group is a metric of that name (``step (?P<step>\\d+) loss (?P<loss>\\S+)``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LinePattern:
    """How metrics lines are told and split."""

    #: what the case wrote (a preset's name, or the regex)
    text: str
    #: a metrics line: group ``step``, and either ``rest`` (split by ``pair``) or one named group per metric
    line: re.Pattern
    #: one ``key``/``value`` pair of ``rest`` (None: the line's other named groups are the metrics)
    pair: re.Pattern | None = None
    #: seconds one line may take (None: no bound; a preset, whose patterns cannot backtrack without end)
    timeout_s: float | None = None

    def search(self, line: str) -> Any:
        """The line's match, or None; ``TimeoutError`` when a user's pattern takes longer than ``timeout_s``."""
        if self.timeout_s is None:
            return self.line.search(line)
        return self.line.search(line, timeout=self.timeout_s)


PRESETS = {
    "verl": LinePattern("verl", re.compile(r"(?:^|\s)step:(?P<step>\d+)(?P<rest>(?:\s+-\s+\S.*)?)$"),
                        re.compile(r"\s-\s(?P<key>[^\s:]+):(?P<value>\S+)")),
    "megatron": LinePattern("megatron", re.compile(r"\biteration\s+(?P<step>\d+)\s*/\s*\d+\s*\|(?P<rest>.*)$"),
                            re.compile(r"\s*(?P<key>[^|:]+?):\s*(?P<value>[^|\s]+)\s*(?:\||$)")),
}
#: a regex must name the step
STEP_GROUP = "step"
#: the longest one line may take a user's pattern: a sane pattern takes microseconds on a log line, even on a
#: machine loaded twenty times over
MATCH_TIMEOUT_S = 2.0


def compile_pattern(text: str) -> LinePattern:
    """The pattern a case gave; ``ValueError`` with what is wrong and what to write when it cannot be used."""
    if text in PRESETS:
        return PRESETS[text]
    try:  # re's syntax, and its error messages (they point at where the mistake begins)
        re.compile(text)
    except re.error as exc:
        raise ValueError(f"'{text}' is not a valid regular expression ({exc})") from None
    import regex  # the user's pattern runs on the engine that can bound its time (the module doc)

    try:
        line = regex.compile(text)
    except regex.error as exc:  # re's syntax that this engine reads otherwise: rare, but one line all the same
        raise ValueError(f"'{text}' is not a valid regular expression here ({exc})") from None
    if STEP_GROUP not in line.groupindex:
        raise ValueError(f"'{text}' has no named group (?P<step>...)")
    if len(line.groupindex) < 2:
        raise ValueError(f"'{text}' names no metric (a named group per metric besides step)")
    return LinePattern(text, line, timeout_s=MATCH_TIMEOUT_S)
