"""docs/cli-reference.md is generated from the parsers and the declared run flags: stale, this fails; the surface
counts what a user can type."""

from __future__ import annotations

import argparse
from pathlib import Path

from autotest.cli.reference import BEGIN, END, PAGE, current_surface, refreshed, render, surface
from autotest.inputs.run_flags import OPTIONS, PYTEST, options_for


def test_the_reference_page_is_generated_from_the_current_declaration() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert BEGIN in page and END in page
    assert refreshed(page, render(current_surface())) == page, \
        "docs/cli-reference.md is stale: run `python -m autotest.cli.reference --write`"


def test_every_declared_flag_is_on_each_command_it_names_and_on_the_page() -> None:
    found = current_surface()
    page = PAGE.read_text(encoding="utf-8")
    for option in OPTIONS:
        for command in option.commands:
            assert option.flag in {s for a in found.flags[command] for s in a.option_strings}, (command, option.flag)
        assert f"`{option.flag}`" in page
    assert found.pytest_options == [o.pytest for o in options_for(PYTEST)]


def test_the_surface_counts_commands_flags_old_spellings_and_variables(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    one = sub.add_parser("one")
    one.add_argument("--a")
    one.add_argument("--b", "--old-b", action="store_true")
    one.add_argument("--older", help=argparse.SUPPRESS)
    group = sub.add_parser("group").add_subparsers()
    group.add_parser("leaf").add_argument("--a")
    (tmp_path / "m.py").write_text('X = "RL_AUTOTEST_THING"\nY = "RAY_ADDRESS"\nZ = "HOME"\n')

    def addoption(parser) -> None:
        parser.getgroup("g").addoption("--a")
        parser.getgroup("g").addoption("--c")

    counts = surface(parser, {}, addoption, tmp_path).counts()
    assert counts == {"commands": 2, "flags (counted once per command that takes them)": 3,
                      "distinct flag spellings": 3, "distinct spellings, command line and pytest together": 4,
                      "old spellings kept for one release": 1, "pytest options": 2, "environment variables": 2}
