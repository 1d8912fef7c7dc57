"""``rl-autotest run CASE --tier NAME``: an undeclared tier or a tier on replicates is one line, before any run."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.cli import main


@pytest.mark.parametrize("args, expected", [
    (["--tier", "nightly"], "--tier nightly: the case declares no tier 'nightly' (declared: pr); add tiers: "),
    (["--tier", "pr", "--replicates", "2"], "--tier pr: judged on one seed only for now; run it with --replicates 1"),
    (["--tier=pr/x"], "--tier: "),
])
def test_a_tier_that_cannot_run_is_one_line_and_nothing_runs(tmp_path: Path, capsys, args, expected) -> None:
    results = tmp_path / "results"
    assert main(["run", "tiny-grpo", "--yes", "--no-history", "--results-dir", str(results), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0] and "Traceback" not in err[0]
    assert not results.exists() or not any(results.rglob("results.json"))
