"""Stored text reaches the terminal through one function: a terminal escape or a line break in it is shown
(``\\x1b``, ``\\n``), never obeyed; the commands' lines go through it (history's, promote's, fleet's: their own
tests; compare's verdict lines and every one-line error here)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from autotest.cli import main
from autotest.terminal import echo, printable
from tests.helpers import DATA

ESC = "\x1b]0;owned\x07\x1b[2J"


def test_echo_prints_each_line_escaped() -> None:
    out = io.StringIO()
    echo(f"a{ESC}", "b\nc", 3, file=out)
    assert out.getvalue() == "a\\x1b]0;owned\\x07\\x1b[2J\nb\\nc\n3\n"
    assert printable("plain text, ünïcode") == "plain text, ünïcode"


def test_compare_shows_a_logged_metric_name_escaped(tmp_path: Path, capsys) -> None:
    """The log's own names are untrusted text: the verdict names the metrics the baseline does not, escaped."""
    log = tmp_path / "tracker.jsonl"
    log.write_text("".join(json.dumps({"step": s, f"loss{ESC}": 1.0}) + "\n" for s in range(1, 11)))
    code = main(["compare", "--baseline", str(DATA / "baselines" / "scripted.yaml"), "--current", str(log),
                 "--no-plots", "--no-history"])
    captured = capsys.readouterr()
    assert code in (1, 2) and "loss\\x1b]0;owned" in captured.out + captured.err
    assert "\x1b" not in captured.out + captured.err and "\x07" not in captured.out + captured.err


def test_an_error_line_quoting_user_text_stays_one_line(tmp_path: Path, capsys) -> None:
    missing = tmp_path / f"no{ESC}\nsuch"
    assert main(["compare", "--baseline", str(DATA / "baselines" / "scripted.yaml"), "--current",
                 str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and err.startswith("rl-autotest: error: ")
