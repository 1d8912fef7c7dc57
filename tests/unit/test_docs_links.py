"""The README is a landing page that stays true, and every pointer into the docs resolves.

- README ≤ 250 lines; its two fresh-machine commands are the ones CI runs (`.ci/run`);
- every relative link or image in the README names a file that exists;
- every `rl-autotest …` command the README shows parses with the real command-line parser;
- every `docs/<page>.md` the code, the case and baseline files and the workflows point users to exists and is
  in the site's nav (a message that says "see docs/…" must lead somewhere), and the code no longer points
  to the README for reference material.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from autotest.cli import build_parser
from autotest.consistency.cli import build_parser as analyze_parser

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
GRPO_COMMAND = "bash scripts/bootstrap.sh && .venv/bin/python -m pytest -m grpo"
SUITE_COMMAND = "bash scripts/bootstrap.sh --all && .venv/bin/python -m pytest -n auto"


def nav_pages() -> set[str]:
    def walk(node) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, list):
            return [page for item in node for page in walk(item)]
        if isinstance(node, dict):
            return [page for value in node.values() for page in walk(value)]
        return []

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    return set(walk(config["nav"]))


def readme_code_lines() -> list[str]:
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", README, flags=re.S | re.M)
    return [line.strip() for block in blocks for line in block.splitlines()]


def test_readme_is_a_landing_page() -> None:
    assert len(README.splitlines()) <= 250


def test_readme_fresh_machine_commands_are_what_ci_runs() -> None:
    lines = readme_code_lines()
    assert GRPO_COMMAND in lines and SUITE_COMMAND in lines
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    install, run = SUITE_COMMAND.split(" && ")
    assert install in ci and run in ci


def test_readme_links_resolve() -> None:
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert local, "the README links into the docs"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"
    pages = {t.removeprefix("docs/") for t in local if t.startswith("docs/") and t.endswith(".md")}
    assert pages <= nav_pages(), f"README links to docs pages outside the site's nav: {pages - nav_pages()}"


SHOWN = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def shown_commands(path: Path) -> list[str]:
    """The `rl-autotest …` lines of a page's code blocks: continuations joined, prompts, comments and
    optional `[--flag X]` parts dropped (those are the same options, shown as optional)."""
    text = path.read_text(encoding="utf-8")
    blocks = "\n".join(re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M)).replace("\\\n", " ")
    commands = []
    for line in blocks.splitlines():
        line = line.strip().removeprefix("$ ")
        if line.startswith("rl-autotest "):
            line = re.sub(r"\[(--[^\]]+)\]", r"\1", line.split(" #", 1)[0].split(";", 1)[0]).strip()
            commands.append(line)
    return commands


@pytest.mark.parametrize("page", SHOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_shown_commands_parse(page: Path, capsys) -> None:
    """Every command a page shows is one `rl-autotest --help` accepts (flags and subcommands as they are)."""
    for command in shown_commands(page):
        argv = shlex.split(command)[1:]
        if argv[:1] == ["init"] and "--" in argv:  # the training command after -- is init's, kept verbatim
            argv = argv[:argv.index("--")]
        parser = analyze_parser() if argv[:2] == ["consistency", "analyze"] else build_parser()
        try:
            parser.parse_args(argv[2:] if argv[:2] == ["consistency", "analyze"] else argv)
        except SystemExit:
            pytest.fail(f"{page.name} shows a command that `rl-autotest` refuses: {command}\n"
                        f"{capsys.readouterr().err}")


def test_the_readme_shows_the_commands() -> None:
    assert any(c.startswith("rl-autotest calibrate ") for c in shown_commands(ROOT / "README.md"))


POINTER = re.compile(r"docs/([a-z0-9_-]+\.md)")
POINTING = [*sorted((ROOT / "autotest").rglob("*.py")), *sorted((ROOT / "autotest" / "cases").glob("*.yaml")),
            *sorted((ROOT / "baselines").glob("*.yaml")), *sorted((ROOT / ".github" / "workflows").glob("*.yml")),
            ROOT / ".ci" / "run"]


def test_pointers_into_the_docs_resolve() -> None:
    found = {(path.relative_to(ROOT), page) for path in POINTING
             for page in POINTER.findall(path.read_text(encoding="utf-8"))}
    assert {page for _, page in found} >= {"cases.md", "baselines.md", "calibration.md"}
    pages = nav_pages()
    wrong = sorted((str(path), page) for path, page in found if page not in pages or not (ROOT / "docs" / page).is_file())
    assert not wrong, f"pointers to docs pages that are not in the site: {wrong}"


def test_the_package_points_to_the_docs_not_the_readme() -> None:
    stale = [str(p.relative_to(ROOT)) for p in (ROOT / "autotest").rglob("*") if p.suffix in (".py", ".yaml")
             and "README" in p.read_text(encoding="utf-8")]
    assert not stale, f"these point users to the README for reference material; point to docs/<page>.md: {stale}"
