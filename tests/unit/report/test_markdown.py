from __future__ import annotations


def test_reduced_checks_show_their_statistic_beside_the_worst_step():
    from autotest.judge.model import Verdict
    from autotest.report.markdown import render_markdown
    from tests.unit.judge.test_checks import check

    golden = {s: 0.0 for s in range(1, 11)}
    r = check(golden, {s: (0.5 if s == 10 else 0.01) for s in range(1, 11)}, scope="percentile", percentile=80)
    text = render_markdown(Verdict(r.status, "c", (r,)))
    # the row also says how many steps a percentile passed over
    assert ("| m[percentile] | ✅ PASS | worst 10 | 0 | 0.5 | p80 = 0.01; 1/10 steps breach | absolute < 0.1 | gate |"
            in text)


def test_a_replicate_mean_shows_every_replicate_its_own_values_and_the_scale():
    from pathlib import Path

    from autotest.judge.model import ERROR, PASS, CheckResult, Replicate, Verdict
    from autotest.report.markdown import render_markdown, render_step_summary

    check = CheckResult("m[pooled 1-10]", PASS, "ok", metric="m", method="absolute", operator="<", threshold=2.29,
                        scope="pooled", observed=0.4)
    crashed = CheckResult("replicate[r2-seed5]", ERROR, "replicate r2-seed5: run exited with code 1 at step 3",
                          kind="structural")
    replicates = (Replicate(1, 0, "/res/replicates/r1-seed0", PASS, "0", 30.5, True, {"m[pooled 1-10]": 0.6}),
                  Replicate(2, 5, "/res/replicates/r2-seed5", ERROR, "1", 3.0, False, {"m[pooled 1-10]": None}))
    verdict = Verdict(ERROR, "c", (crashed, check), replicates=replicates, pooled_threshold_scale=0.7638)
    text = render_markdown(verdict, folder=Path("/res"))
    assert text.startswith("# c: ⚠️ ERROR (mean of 2 replicates)\n")
    assert "- **ERROR** replicate r2-seed5: run exited with code 1 at step 3" in text
    assert "| r1-seed0 | 0 | 0 | 30.5 | ✅ PASS | yes | [replicates/r1-seed0](replicates/r1-seed0) |" in text
    assert "| r2-seed5 | 5 | 1 | 3 | ⚠️ ERROR | no | [replicates/r2-seed5](replicates/r2-seed5) |" in text
    assert "| m[pooled 1-10] | 0.4 ✅ PASS | 0.6 | - |" in text
    assert "x 0.764 = sqrt((1/K + 1/N) / (1 + 1/N)) for K = 1" in text
    assert render_step_summary(verdict).startswith("### c: ⚠️ ERROR (mean of 2 replicates)")
