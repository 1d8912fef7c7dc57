"""What promotion writes always loads: a ``--force`` reason (user text) is escaped in its comment line, a file that
would not load never replaces the baseline (nor leaves a backup), and ``--to-shadow`` never silently replaces a
candidate already in shadow. Its console lines show stored text escaped (autotest.calibration.promote,
autotest.cli.calibrate's ``baseline``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.calibration.promote import _install, comment_line, promote, promote_to_shadow
from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from autotest.judge.shadow import candidate_label
from tests.unit.calibration.test_promote import write
from tests.unit.calibration.test_shadow_candidate import baseline_and_candidate, promote as promote_cli

REASON = "reviewed \x1b[2J\x1b]0;owned\x07 by\nX \x85 \u2028 \ud800"


def test_a_force_reason_with_control_characters_is_escaped_and_the_baseline_loads(tmp_path: Path) -> None:
    target = write(tmp_path / "case-a.yaml", provenance=None)
    write(target.with_name("case-a.candidate.yaml"), threshold=0.3, provenance=None)
    promotion = promote(target, force=REASON)
    first = target.read_text(encoding="utf-8").splitlines()[0]
    # (\x85 and \u2028 are whitespace to str.split: one space, as a newline is)
    assert first.startswith("# promoted with --force: reviewed \\x1b[2J\\x1b]0;owned\\x07 by X \\ud800")
    assert load_baseline(target).checks[0].threshold == 0.3  # loadable: YAML forbids the raw characters
    assert promotion.forced == REASON
    assert comment_line("a\nb\r\x00c").decode() == "# a b \\x00c\n"


def test_a_file_that_would_not_load_leaves_the_old_baseline_and_no_backup(tmp_path: Path) -> None:
    target = write(tmp_path / "case-a.yaml", provenance=None)
    before = target.read_bytes()
    with pytest.raises(UsageError) as info:
        _install(target, b"# \x1b\n" + before, backup=True)
    message = str(info.value)
    assert message.startswith(f"{target}: not written: the new file would not load (") and "\n" not in message
    assert message.endswith("; the file there is unchanged") and ".case-a.yaml." not in message  # the temp unnamed
    assert target.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["case-a.yaml"]


def test_to_shadow_refuses_to_replace_a_candidate_in_shadow_unless_forced(tmp_path: Path, capsys) -> None:
    baseline = baseline_and_candidate(tmp_path)
    assert promote_cli(tmp_path, "--to-shadow") == 0
    shadow = tmp_path / "shadowed.shadow.yaml"
    held = shadow.read_bytes()
    label = candidate_label(shadow)
    baseline_and_candidate(tmp_path)  # a second candidate, reviewed later
    capsys.readouterr()
    assert promote_cli(tmp_path, "--to-shadow") == 2
    assert capsys.readouterr().out == (
        f"rl-autotest: error: {shadow}: a candidate is already in shadow ({label}); not replaced: promote it "
        "(baseline promote CASE --from-shadow) or remove that file, or pass --force REASON to replace it (its nights "
        "restart)\n")
    assert shadow.read_bytes() == held and (tmp_path / "shadowed.candidate.yaml").is_file()
    assert promote_cli(tmp_path, "--to-shadow", "--force", REASON) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "forced: reviewed \\x1b[2J\\x1b]0;owned\\x07 by\\nX \\x85 \\u2028 \\ud800 (recorded in the baseline)" in out
    assert shadow.read_text(encoding="utf-8").splitlines()[0] == (
        f"# put in shadow with --force: reviewed \\x1b[2J\\x1b]0;owned\\x07 by X \\ud800 (replaced {label}, "
        "its nights restart)")
    assert load_baseline(shadow).name == load_baseline(baseline).name
    with pytest.raises(UsageError, match="no candidate to put in shadow"):
        promote_to_shadow(baseline, force="again")
