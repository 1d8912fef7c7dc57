"""Every exit code the command can return is named in ``rl-autotest --help`` and in docs/running.md's opening."""

from __future__ import annotations

import re

from autotest.cli import build_parser
from autotest.cli.common import EXIT_ENVIRONMENT, EXIT_ERROR, EXIT_FAIL, EXIT_NOT_COLLECTED, EXIT_PASS, exit_code_for
from tests.helpers import ROOT

CODES = (EXIT_PASS, EXIT_FAIL, EXIT_ERROR, EXIT_ENVIRONMENT, EXIT_NOT_COLLECTED)


def test_the_codes_exit_code_for_returns_are_the_declared_ones() -> None:
    returned = {exit_code_for(status, environment) for status in ("PASS", "FAIL", "ERROR", "INFO")
                for environment in (False, True)}
    assert returned <= set(CODES) and EXIT_ENVIRONMENT in returned


def test_help_names_every_exit_code() -> None:
    text = " ".join(build_parser().format_help().split())
    for code in CODES:
        assert re.search(rf"\b{code} [A-Za-z]", text), f"--help does not name exit code {code}: {text[-400:]}"
    assert "75 an environment outcome" in text


def test_running_page_opens_with_every_exit_code() -> None:
    opening = (ROOT / "docs" / "running.md").read_text(encoding="utf-8").split("\n## ")[0]
    opening = " ".join(opening.split())
    for code in CODES:
        assert re.search(rf"\b{code} [a-z]", opening), f"docs/running.md's first paragraph lacks exit code {code}"
