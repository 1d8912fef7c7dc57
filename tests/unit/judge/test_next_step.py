"""The next-step line a console, a pytest failure and a step summary show: short, and no clause said twice.

Every rule's line (its placeholders filled with realistic values), every tie's line, and the lines of real verdicts
of the tie scenarios (a reward logged 2 x golden, a steady loss-term lead) stay under :data:`WORD_BOUND` words with
no clause and no five-word run repeated (a tie once pasted both rules' suggestions and the check that tells them
apart into one 100-word sentence)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autotest.judge.model import TriageFinding
from autotest.judge.triage import RULES, TIES
from autotest.judge.verdict import compare

WORD_BOUND = 70


class _Filled(dict):
    """A rule's ``{placeholders}`` filled as a real reading fills them (a metric name, a step, a direction)."""

    def __missing__(self, key: str) -> str:
        return {"steps": "30", "expected": "45", "onset": "12", "lead": "10", "weight": "0.9",
                "direction": "below", "relation": "100 x golden"}.get(key, "response/response_len/mean")


def repeats(line: str) -> list[str]:
    """Clauses (between ; : , and brackets) of three or more words said twice, and five-word runs said twice."""
    clauses = [" ".join(c.split()).lower() for c in re.split(r"[;:,()]", line)]
    clauses = [c for c in clauses if len(c.split()) >= 3]
    said = [c for i, c in enumerate(clauses) if c in clauses[:i]]
    words = re.findall(r"[\w'/-]+", line.lower())
    runs = [" ".join(words[i:i + 5]) for i in range(len(words) - 4)]
    said += [r for i, r in enumerate(runs) if r in runs[:i]]
    return said


def test_the_repeat_finder_finds_a_repeated_clause() -> None:  # the check below can fail
    assert repeats("check the loss terms; check the loss terms")
    assert repeats("a b c d e and then a b c d e")
    assert not repeats("check the loss terms; diff the optimiser's step size")


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_each_rules_line_is_short_and_says_each_clause_once(rule) -> None:
    line = TriageFinding(rule.name, rule.suggestion.format_map(_Filled()), "").next_step
    assert len(line.split()) <= WORD_BOUND, f"{len(line.split())} words: {line}"
    assert not repeats(line), repeats(line)


@pytest.mark.parametrize("pair", TIES, ids="-or-".join)
def test_a_tie_names_both_rules_and_the_check_once(pair: tuple[str, str]) -> None:
    first, second = pair
    suggestion = next(r.suggestion for r in RULES if r.name == first).format_map(_Filled())
    line = TriageFinding(first, suggestion, "", uncertain_with=second, to_tell=TIES[pair]).next_step
    assert line.startswith(f"{first} or {second}, ") and TIES[pair] in line
    assert len(line.split()) <= 50, f"{len(line.split())} words: {line}"
    assert not repeats(line), repeats(line)


def _primary_line(verdict) -> str:
    return next(f.next_step for f in verdict.triage if f.primary)


def test_the_tie_verdicts_next_step_lines_are_short(tmp_path: Path) -> None:
    from tests.unit.judge.test_triage_loss_term import _baseline, _trace, steady
    from tests.unit.judge.test_triage_roles import XTUNER, _case, _scale

    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
    lines = [_primary_line(compare(_baseline(tmp_path / "a"), _trace(steady, rewards_from=12)).verdict),
             _primary_line(_case(tmp_path / "b", XTUNER, lambda c: _scale(c["reward"], 2.0)))]
    assert lines[0].startswith("loss-term or gradual") and lines[1].startswith("rewards-only or logging-units")
    for line in lines:
        assert len(line.split()) <= 50 and not repeats(line), line
