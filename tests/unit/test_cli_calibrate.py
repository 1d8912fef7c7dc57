from __future__ import annotations

import argparse

import pytest

from autotest.cli_calibrate import add_commands
from autotest.errors import UsageError


def cli(*argv: str) -> int:
    """What ``autotest.cli.main`` does with these commands: dispatch, one line and exit 2 on a usage error."""
    parser = argparse.ArgumentParser(prog="rl-autotest")
    commands: dict = {}
    add_commands(parser.add_subparsers(dest="command", required=True), commands)
    args = parser.parse_args(list(argv))
    try:
        return commands[args.command](args)
    except UsageError as exc:
        print(f"rl-autotest: error: {exc}")
        return 2


def test_registers_both_commands():
    parser = argparse.ArgumentParser()
    commands: dict = {}
    add_commands(parser.add_subparsers(dest="command"), commands)
    assert set(commands) == {"calibrate", "baseline"}
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
    assert cli(*argv) == 2
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and message in out[0]
