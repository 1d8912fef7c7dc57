from __future__ import annotations


def test_reduced_checks_show_their_statistic_beside_the_worst_step():
    from autotest.judge.model import Verdict
    from autotest.report.markdown import render_markdown
    from tests.unit.judge.test_checks import check

    golden = {s: 0.0 for s in range(1, 11)}
    r = check(golden, {s: (0.5 if s == 10 else 0.01) for s in range(1, 11)}, scope="percentile", percentile=80)
    text = render_markdown(Verdict(r.status, "c", (r,)))
    assert "| m[percentile] | ✅ PASS | worst 10 | 0 | 0.5 | p80 = 0.01 | absolute < 0.1 | gate |" in text
