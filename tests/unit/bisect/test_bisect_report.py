"""bisect.md quotes anyone's text (a commit's subject and author, refs in the message, a probe's reason): it stays
markdown-inert, never a heading, HTML, a link or a code span of its own (autotest.bisect.session.render_bisect)."""

from __future__ import annotations

from autotest.bisect.session import render_bisect


def test_a_hostile_commit_subject_and_author_render_as_text() -> None:
    data = {"case": "c", "status": "found", "message": "first bad commit abc\n# PASS", "rounds": 1, "runs": 2,
            "device_seconds": 0.0, "confidence": "high", "last_good": "a" * 40,
            "first_bad": {"sha": "b" * 40, "subject": "fix <img src=x onerror=alert(1)> [x](http://evil) `y`",
                          "author": "dev\n## FAIL"},
            "flipped_gates": [{"check": "m`[final]", "threshold": 0.1, "good": 0.0, "bad": 0.2}],
            "probes": [{"commit": "b" * 40, "answer": "bad", "confidence": "high", "runs": 1,
                        "reason": "<script>x</script>"}]}
    text = render_bisect(data)
    assert "<img" not in text and "<script>" not in text and "[x](http" not in text
    assert not any(line.startswith(("# PASS", "## FAIL")) for line in text.splitlines())
    assert "fix &lt;img src=x onerror=alert(1)&gt; [x\\](http://evil) \\`y\\` (dev ## FAIL)" in text
    assert "| ``m`[final]`` |" in text
