"""A script the harness writes is built from argument lists: each recorded value is one quoted word, and a comment's
control characters are escaped, so no value ends the comment or becomes a command (the script is executed in
tests/integration/calibration/test_batch_script.py)."""

from __future__ import annotations

import shlex

import pytest

from autotest.shell_script import command, comment, script_text

HOSTILE = ["$(touch X)", "`touch X`", "a; touch X", "a\ntouch X", "it's \"quoted\"", "a\r\ntouch X", "\x1b[2J"]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_value_is_one_word_and_a_comment_stays_one_line(value: str) -> None:
    line = command(["rl-autotest", "calibrate", value, "--runs", "3"])  # a newline stays inside its quotes
    assert shlex.split(line) == ["rl-autotest", "calibrate", value, "--runs", "3"]
    note = comment(f"image {value} -> b")
    assert note.startswith("# ") and note.isprintable()  # no newline, carriage return or escape survives


def test_the_script_is_the_interpreter_the_comments_set_e_and_the_commands() -> None:
    text = script_text([["a", "b c"], ["d"]], comments=["first", "two\nlines"])
    assert text == "#!/bin/sh\n# first\n# two\\nlines\nset -e\na 'b c'\nd\n"
    with pytest.raises(ValueError, match="needs a command"):
        command([])
