"""Both A/B refs are resolved before any run: a ref the framework repository lacks, or one git refuses as a name,
is one line naming the flag the user typed (``--head``, ``--base``), and nothing ran. A real git repository stands
in for the framework (the fixtures of tests/integration/run/test_framework_checkout.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.cli import main
from tests.integration.run.test_framework_checkout import case_and_baseline, framework  # noqa: F401

PAIRED = """
paired:
  pairs: 2
  perturbation: natural
  windows: [{metric: response/rewards/mean, steps: [1, 3], noise: 0.01, level: 0.5}]
"""


@pytest.mark.parametrize("base, head, flag, says", [
    ("main", "no-such-branch", "--head", "framework fakefw: no branch, tag or ref 'no-such-branch' in "),
    ("no-such-branch", "main", "--base", "framework fakefw: no branch, tag or ref 'no-such-branch' in "),
    ("main", "a..b", "--head", "'a..b' is not a ref name (git check-ref-format refuses it)"),
])
def test_a_ref_that_does_not_resolve_is_refused_before_either_side_runs(case_and_baseline, tmp_path: Path,  # noqa: F811
                                                                       capsys, base, head, flag, says) -> None:
    case, baseline = case_and_baseline
    baseline.write_text(baseline.read_text() + PAIRED)
    results = tmp_path / "results"
    code = main(["ab", str(case.source), "--base", base, "--head", head, "--seeds", "11", "--results-dir",
                 str(results), "--no-plots", "--baselines-dir", str(baseline.parent)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    ref = head if flag == "--head" else base
    assert err[0].startswith(f"rl-autotest: error: {flag} {ref!r}: {says}"), err[0]
    assert "--framework-ref" not in err[0]
    assert not results.exists()
