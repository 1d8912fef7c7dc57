"""The step summary from hostile text: a case name, a check message quoting a log line, a ref or a path
cannot forge a line, inject HTML, a link or an image into $GITHUB_STEP_SUMMARY."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.judge.model import ERROR, FAIL, CheckResult, Verdict
from autotest.report.markdown import render_step_summary
from autotest.report.md_safe import md_code, md_text

HOSTILE = "x<script>alert(1)</script>\n### tiny-grpo: ✅ PASS\n![t](https://evil.example/p.png) [click](https://e.x) <img src=x onerror=alert(1)> **bold** `code`"


def test_text_stays_on_one_line_and_every_active_character_is_escaped() -> None:
    text = md_text(HOSTILE)
    assert "\n" not in text and "\r" not in md_text("a\r\nb\u2028c")
    assert "<" not in text and ">" not in text and "&lt;script&gt;" in text
    assert "](" not in text.replace("\\](", "") and "[click\\](https://e.x)" in text and "![t\\](" in text
    assert md_text("[a][ref]") == "[a\\][ref]"  # a reference link cannot close either
    assert "\\`code\\`" in text  # no code span opens
    # what cannot act reads as written
    assert md_text("rewards[percentile] < 0.19") == "rewards[percentile] &lt; 0.19"
    assert md_text("[Errno 28] No space left") == "[Errno 28] No space left"
    assert md_text("a\\[b](c)") == "a\\\\[b\\](c)"  # a backslash of the text cannot undo an escape


@pytest.mark.parametrize("path, span", [
    ("/r/report.md", "`/r/report.md`"),
    ("/r/a`b/report.md", "``/r/a`b/report.md``"),
    ("`x`", "`` `x` ``"),
    ("/r/\n# forged", "`/r/ # forged`"),
])
def test_a_path_is_one_code_span_whatever_backticks_it_holds(path: str, span: str) -> None:
    assert md_code(path) == span


def test_the_step_summary_of_a_hostile_verdict_is_inert(tmp_path: Path) -> None:
    failing = CheckResult(check_id="m[pooled]", status=FAIL, message=HOSTILE)
    broken = CheckResult(check_id="run[x]", status=ERROR, message="line one\n- PASS: forged item")
    verdict = Verdict(FAIL, "evil\n### case: PASS <b>", (failing, broken),
                      context={"framework": {"name": "fw", "sha": "a" * 40, "ref": "<img src=x>", "repo": "r",
                                             "origin": "command line"}})
    text = render_step_summary(verdict, report_path=tmp_path / "a`b" / "report.md", history=["drift <i>x</i>"])
    lines = text.strip("\n").split("\n")
    assert lines[0].startswith("### evil ### case: PASS &lt;b&gt;: ")
    # every line after the heading is one of ours: a list item the harness wrote, never a forged one
    assert [line.split(":")[0] for line in lines[2:]] == ["- FAIL", "- ERROR", "- drift &lt;i&gt;x&lt;/i&gt;",
                                                        "- framework under test", "- report"]
    assert "<" not in text.replace("&lt;", "")
    assert f"``{tmp_path / 'a`b' / 'report.md'}``" in text
