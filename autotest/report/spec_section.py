"""report.md's "The framework's own spec" section: the spec read at the commit under test, and each way the
baseline differs from it (rendered from the verdict's :class:`autotest.judge.spec_diff.SpecComparison`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from autotest.report.md_safe import md_text

if TYPE_CHECKING:
    from autotest.judge.spec_diff import SpecComparison


def spec_lines(note: SpecComparison | None) -> list[str]:
    """The section's lines (none when the case names no framework spec)."""
    if note is None:
        return []
    follows = {"follow": "this case follows it: its environment was set for the run and its checks were the gate",
               "own": "this case holds its own: the baseline's checks were the gate"}[note.mode]
    lines = ["", "## The framework's own spec", "",
             f"- `{note.path}`, case `{md_text(note.case)}`, at commit `{note.commit or 'unknown'}`"
             + (f" (last changed in `{note.changed_in}`)" if note.changed_in else ""),
             f"- {follows}" if note.state == "compared" else f"- {md_text(note.note)}"]
    if note.state == "compared":
        if note.differences:
            lines += ["", "| what | key | the framework's spec | this baseline / case |", "|---|---|---|---|"]
            lines += [f"| {d.topic} | `{md_text(d.key)}` | {md_text(d.framework)} | {md_text(d.baseline)} |"
                      for d in note.differences]
            lines += ["", *[f"- {md_text(d.line)}" for d in note.differences]]
        else:
            lines.append("- no difference: the baseline's checks, environment and timeout match the spec")
    return lines
