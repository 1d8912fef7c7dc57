"""Console logs → :class:`~autotest.judge.trace.Trace`, by a line pattern (:mod:`autotest.readers.console_pattern`).

The format is ``console:<pattern>`` (a case writes ``tracker.format: console`` and ``tracker.pattern``): a
line the pattern matches is a metrics row at its ``step``; every other line (warnings, progress bars, the
framework's own chatter) is skipped. A value that is not a number (``nan`` and ``inf`` are numbers) is noted
as text, never dropped silently; a metric named ``val*``/``eval*`` makes its step an eval step. Rows at one
step merge as :mod:`autotest.readers.merge` says (a line printed twice counts once). A user's pattern runs with a
time bound per line (:data:`~autotest.readers.console_pattern.MATCH_TIMEOUT_S`); a line it cannot decide in time,
or a ``step`` group that matched no whole number, is one error naming the line.
"""

from __future__ import annotations

from pathlib import Path

from autotest.errors import UsageError
from autotest.judge.trace import Trace
from autotest.readers.console_pattern import PRESETS, STEP_GROUP, LinePattern, compile_pattern
from autotest.readers.registry import find
from autotest.readers.trace_builder import Builder, step_of

FORMAT = "console"
EVAL_PREFIXES = ("val", "eval")


def _fix() -> str:
    return find(FORMAT).option_fix  # type: ignore[union-attr]


def _number(text: str) -> float | str:
    try:
        return float(text.rstrip(","))
    except ValueError:
        return text


def _step(where: str, match) -> int:
    """The ``step`` group's whole number; one error line when it matched something else (or nothing)."""
    text = match.group(STEP_GROUP)
    if text is None or not text.strip().isdecimal():  # None: an optional group that took no part; "", "1.5", "-1"
        shown = "nothing" if text is None else repr(text[:40])  # repr escapes control characters
        raise UsageError(f"{where}: the console pattern's step group matched {shown}, not a whole number >= 0; make "
                         "(?P<step>...) match only digits, e.g. (?P<step>\\d+)")
    return step_of(where, int(text))


def _values(pattern: LinePattern, match) -> dict[str, object]:
    if pattern.pair is None:
        return {k: _number(v) for k, v in match.groupdict().items() if k != "step" and v is not None}
    return {m.group("key").strip(): _number(m.group("value")) for m in pattern.pair.finditer(match.group("rest"))}


def read_console(path: Path, keep: frozenset[str] | None = None, option: str = "verl") -> Trace:
    """Read every line of ``path`` the pattern ``option`` (a preset or a regex) matches."""
    try:
        pattern = compile_pattern(option)
    except ValueError as exc:
        raise UsageError(f"console format: {exc}; {_fix()}") from None
    builder = Builder(path, f"{FORMAT}:{option}", keep)
    lines = 0
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                lines = number
                try:
                    match = pattern.search(line.rstrip("\r\n"))
                except TimeoutError:
                    raise UsageError(f"{path}:{number}: the console pattern {option!r} did not finish on "
                                     f"this line within {pattern.timeout_s:g} s (a nested quantifier such as (a+)+ "
                                     "backtracks without end); simplify tracker.pattern") from None
                if match is None:
                    continue
                step = _step(f"{path}:{number}", match)
                values = _values(pattern, match)
                if not values or not builder.admit(step, values, number, hash(line.strip())):
                    continue
                builder.mark(step, (k.startswith(EVAL_PREFIXES) for k in values))
                builder.put_row(step, values, number)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read metric log ({exc.strerror}); check the path") from None
    if not builder.train_steps and not builder.eval_steps:
        raise UsageError(f"{path}: no line of {lines} matches the console pattern {option!r}; check tracker.pattern "
                         f"({_fix()})")
    return builder.build()


def sniff(row: object, line: str | None) -> str | None:
    """A first line with content that a preset matches (a console log opening with chatter is not guessed:
    name its format)."""
    if row is not None or line is None:
        return None
    return next((f"{FORMAT}:{name}" for name, p in PRESETS.items() if p.line.search(line.rstrip("\r\n"))), None)
