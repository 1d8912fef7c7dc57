"""k3 breached but every dumped module aligned: the divergence is after the model (issue 11)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.consistency.analyze import analyze_dumps
from autotest.consistency.job import _summary
from autotest.consistency.logprob_compare import NOT_PROVIDED
from tests.integration.consistency.scenarios import collect

K3 = "mismatch/mismatch_k3_kl"


@pytest.mark.slow
def test_aligned_dumps_under_a_k3_breach_point_at_the_sampling_path(tmp_path: Path) -> None:
    run = collect(tmp_path / "healthy", lambda rollout: rollout)  # the modules compute the same function
    out = tmp_path / "out"
    report = analyze_dumps(run.actor_dump, run.rollout_dump, out,
                           train_correlation=run.actor_log, rollout_correlation=run.rollout_log,
                           context={"breached_metrics": [K3]})
    assert report.verdict == "no_divergence"  # what the dumps show, stated as such
    assert "after the model" in report.next_checks[0]
    assert any("temperature" in c and "logits processors" in c for c in report.next_checks)
    markdown = (out / "output_5_root_cause_report.md").read_text()
    assert "**after the model**" in markdown
    summary = _summary(report, [], [K3])
    assert "no divergence" not in summary and "after the model" in summary and K3 in summary
    # no recorded log-probs were given: the sampling path is inferred, and the report says it was not checked
    assert report.divergence == "sampling_path_unchecked" and summary.startswith(NOT_PROVIDED)
    assert NOT_PROVIDED in markdown


@pytest.mark.slow
def test_aligned_dumps_without_a_breach_are_still_no_divergence(tmp_path: Path) -> None:
    run = collect(tmp_path / "healthy", lambda rollout: rollout)
    report = analyze_dumps(run.actor_dump, run.rollout_dump, tmp_path / "out",
                           train_correlation=run.actor_log, rollout_correlation=run.rollout_log)
    assert _summary(report, [], []) == "no divergence"
    assert not any("after the model" in c for c in report.next_checks)
