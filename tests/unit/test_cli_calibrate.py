from __future__ import annotations

import pytest

from autotest.cli import COMMANDS, build_parser
from tests.helpers import run_cli


def test_registers_both_commands():
    parser = build_parser()
    assert {"calibrate", "baseline"} <= set(COMMANDS)
    args = parser.parse_args(["calibrate", "tiny-grpo", "--out", "/x", "--runs", "4", "--allow-dirty"])
    assert (str(args.baselines_dir), args.runs, args.allow_dirty, args.promote) == ("/x", 4, True, False)
    with pytest.raises(SystemExit):
        parser.parse_args(["baseline"])  # an action is required


@pytest.mark.parametrize("argv,message", [
    (["calibrate", "no-such-case"], "no-such-case: no such case; known cases:"),
    (["calibrate", "tiny-grpo", "--runs", "1"], "--runs: 1 is below 2; run-to-run noise needs at least two runs"),
    (["calibrate", "tiny-grpo", "--jobs", "0"], "--jobs: 0 is below 1"),
])
def test_usage_errors_are_one_line(argv, message, capsys):
    assert run_cli(*argv) == 2
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and message in out[0]
