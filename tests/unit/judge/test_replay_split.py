"""The frozen-rollout split's reading of its two pairings: both move is the trainer, neither the rollout, one of
them unclear; eval never decides; a pairing that could not be judged makes no finding."""

from __future__ import annotations

from autotest.judge.model import ERROR, FAIL, PASS
from autotest.judge.paired import PairedResult, PairedVerdict
from autotest.judge.replay_split import NOT_JUDGED, ROLLOUT, TRAINER, UNCLEAR, read_pairing, split_side

GROUPS = {"entropy/mean": "rollout", "eval/accuracy": "eval", "mismatch/k3": "consistency"}


def _result(metric: str, status: str) -> PairedResult:
    return PairedResult(f"{metric}[paired 1-15]", metric, (1, 15), status, {11: 0.1}, 0.1, 0.01, 0.02, "")


def _pairing(name: str, failed: tuple[str, ...] = (), status: str | None = None, reason: str = ""):
    results = tuple(_result(m, FAIL if m in failed else PASS) for m in GROUPS)
    verdict = PairedVerdict(status or (FAIL if failed else PASS), results, (11,), reason=reason)
    return read_pairing(name, verdict, GROUPS.get)


def test_both_pairings_moving_is_the_trainer():
    finding = split_side(_pairing("head on base", ("entropy/mean",)), _pairing("base on head", ("mismatch/k3",)))
    assert finding.side == TRAINER
    moved = "(entropy/mean (steps 1-15) on the base's batches; mismatch/k3 (steps 1-15) on the head's)"
    assert moved in finding.summary


def test_neither_moving_is_the_rollout_and_eval_is_named_not_counted():
    finding = split_side(_pairing("head on base", ("eval/accuracy",)), _pairing("base on head", ("eval/accuracy",)))
    assert finding.side == ROLLOUT
    assert finding.summary.endswith("moved under replay: eval/accuracy (steps 1-15))")  # once, not per pairing
    assert "consistency job" in finding.next_step


def test_one_pairing_moving_is_unclear_and_names_it():
    finding = split_side(_pairing("head on base"), _pairing("base on head", ("entropy/mean",)))
    assert finding.side == UNCLEAR and finding.summary.startswith("unclear: base on head moved")


def test_a_pairing_that_could_not_be_judged_makes_no_finding():
    broken = _pairing("base on head", status=ERROR, reason="base-on-head-rollouts-seed11: crashed")
    finding = split_side(_pairing("head on base", ("entropy/mean",)), broken)
    assert finding.side == NOT_JUDGED and "crashed" in finding.summary
