"""The A/A nudge's grammar (autotest.inputs.aa_nudge): each form parsed, anything else refused."""

from __future__ import annotations

import pytest

from autotest.inputs.aa_nudge import ENV, NATURAL, OPTIMIZER_ULP, THREADS, Nudge, nudge_problem, parse_nudge


@pytest.mark.parametrize("text, nudge", [
    ("natural", Nudge(NATURAL)),
    ("RL_AUTOTEST_AA_PERTURB=1", Nudge(ENV, "RL_AUTOTEST_AA_PERTURB", "1")),
    ("NCCL_ALGO=Tree", Nudge(ENV, "NCCL_ALGO", "Tree")),
    ("CUBLAS_WORKSPACE_CONFIG=:4096:8", Nudge(ENV, "CUBLAS_WORKSPACE_CONFIG", ":4096:8")),
    ("threads:2", Nudge(THREADS, value="2")),
    (" optimizer-ulp:7 ", Nudge(OPTIMIZER_ULP, value="7")),
])
def test_each_form_is_read(text: str, nudge: Nudge) -> None:
    assert parse_nudge(text) == nudge and nudge_problem(text) is None


@pytest.mark.parametrize("text", ["", "Natural", "threads:0", "threads:x", "threads:", "optimizer-ulp:1000000",
                                  "ulp:1", "=1", "1X=2", "A B=1", "X=a\nb", 5, None, ["natural"]])
def test_anything_else_is_refused(text: object) -> None:
    with pytest.raises(ValueError, match="is not a perturbation"):
        parse_nudge(text)
    assert nudge_problem(text) == f"{text!r} is not a perturbation"
