"""Guarded promotion: name, provenance and self-check checked; diff shown; old baseline kept; durable."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.calibration.promote import promote
from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline

CHECK = 'checks: [{{metric: m, method: absolute, operator: "<", threshold: {t}}}]\n'
PROVENANCE = "provenance: {{produced_by: rl-autotest calibrate, self_check: {{false_alarm_rate: {rate}}}}}\n"


def write(path: Path, name: str = "case-a", threshold: float = 0.1, golden: str = "{1: 1.0, 2: 2.0}",
          provenance: str | None = PROVENANCE.format(rate=0.0)) -> Path:
    path.write_text(f"name: {name}\ngolden: {{table: {{m: {golden}}}}}\n" + CHECK.format(t=threshold)
                    + (provenance or ""), encoding="utf-8")
    return path


@pytest.fixture
def target(tmp_path: Path) -> Path:
    return write(tmp_path / "case-a.yaml", provenance=None)


def test_promote_shows_the_diff_keeps_a_backup_and_installs(target: Path) -> None:
    before = target.read_text()
    candidate = write(target.with_name("case-a.candidate.yaml"), threshold=0.2, golden="{1: 1.5, 2: 2.0, 3: 3.0}")
    promotion = promote(target)
    assert promotion.changes == ("threshold m[stepwise]: 0.1 -> 0.2",
                                 "golden m: max shift 0.5 at step 1, +1/-0 steps")
    assert promotion.backup is not None and promotion.backup.name.startswith("case-a.yaml.bak-")
    assert promotion.backup.read_text() == before
    assert load_baseline(target).checks[0].threshold == 0.2 and not candidate.exists()


def test_another_cases_candidate_is_refused_even_with_force(target: Path) -> None:
    write(target.with_name("case-a.candidate.yaml"), name="case-b")
    with pytest.raises(UsageError, match=r"candidate.yaml: not promoted: name: it is the baseline of 'case-b', "
                                         r"not 'case-a'; promote it for its own case; fix the candidate$"):
        promote(target, force="reviewed")
    assert "case-a" in target.read_text()


@pytest.mark.parametrize("provenance, problem", [
    (None, "provenance.produced_by: not 'rl-autotest calibrate' (hand-made or edited?)"),
    (PROVENANCE.format(rate=0.2), "provenance.self_check: leave-one-out false-alarm rate 20%")])
def test_unproven_candidates_need_force_and_the_reason_is_recorded(target: Path, provenance, problem) -> None:
    before = target.read_text()
    write(target.with_name("case-a.candidate.yaml"), threshold=0.3, provenance=provenance)
    with pytest.raises(UsageError) as info:
        promote(target)
    assert str(info.value).endswith(f"not promoted: {problem}; recalibrate, or pass --force REASON after review")
    assert target.read_text() == before
    promotion = promote(target, force="hand-tuned after incident 7")
    assert promotion.forced == "hand-tuned after incident 7"
    assert target.read_text().startswith(f"# promoted with --force: hand-tuned after incident 7 (skipped: {problem})")
    assert load_baseline(target).checks[0].threshold == 0.3


def test_a_first_baseline_has_no_backup(tmp_path: Path) -> None:
    write(tmp_path / "case-a.candidate.yaml")
    promotion = promote(tmp_path / "case-a.yaml")
    assert promotion.backup is None and promotion.changes == ("new baseline: 1 checks",)


def test_promote_keeps_the_candidate_s_review_report_beside_the_baseline(target: Path) -> None:
    write(target.with_name("case-a.candidate.yaml"), threshold=0.2)
    target.with_name("case-a.candidate.md").write_text("# review: thresholds and self-check\n")
    promotion = promote(target)
    assert promotion.review == target.with_name("case-a.review.md")
    assert promotion.review.read_text() == "# review: thresholds and self-check\n"
    assert not target.with_name("case-a.candidate.md").exists()
