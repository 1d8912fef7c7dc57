"""Every command a page shows is run by a test, or declared skipped here with the reason.

The commands are every line of every ```bash block of README.md and docs/*.md (a ``\\`` continuation joined, the
trailing comment dropped). Each is declared once, in :data:`RUN` (run here as a real process, in a temporary folder
with its own results root, against a history of fixture runs) or in :data:`SKIPPED` (why not: a GPU, the network,
a long run, a command that acts on the reader's own repository). A command a page adds without a declaration fails
:func:`test_every_command_a_page_shows_is_declared`; a declaration no page shows any longer fails too.

Skipped or not, every ``rl-autotest`` command is parsed by the real parser (a flag the docs name that the command
does not take fails), and every pytest flag a page names is checked against the plugin's options. The sample outputs
the pages mark (``<!-- sample: NAME -->``) are written by scripts/doc_samples.py; the slow test runs it in --check
mode.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests import waits

ROOT = Path(__file__).resolve().parents[2]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
BLOCK = re.compile(r"^```(?:bash|sh|shell)\n(.*?)^```", re.M | re.S)

# why a command is not run here: the reasons, each said once
INSTALLS = "installs packages from PyPI (network) into .venv: minutes"
WHOLE_SUITE = "the whole suite, about 25 minutes on 2 cores; CI runs it (.ci/run)"
QUICK_TIER = "the quick tier, about 5 minutes on 2 cores; CI's whole suite holds it"
UNIT_TIER = "the unit tests, about 40 s on 2 cores: a tier of the suite this test is part of"
MKDOCS = "tests/integration/test_docs_site.py builds the site strict (into a temporary folder)"
SERVER = "starts a server that runs until stopped"
GRPO_GATE = ("a real 45-step run (about 20 s); its output is the README's generated sample, checked by "
             "test_the_generated_samples_are_what_the_commands_print (slow)")
GPU = "needs an 8-GPU node with a framework checkout"
NETWORK = "fetches a framework ref over the network"
CALIBRATION = "runs the case at 10 seeds or more (minutes of CPU); tests/integration/calibration runs it on small N"
AB = "runs the case on both sides, several seeds each (minutes of CPU); tests/integration/test_ab.py runs it (slow)"
PROMOTE = "replaces the reader's committed baseline with a candidate or shadow written by a calibration"
USER_REPO = "acts on the reader's own repository (git, pip into their environment)"
TRL = ("runs the TRL example trainer (examples/trl-grpo): minutes of CPU; tests/integration/test_adoption_trl.py "
       "runs it (slow)")
DUMPS = "needs MSProbe dumps of a real run; tests/integration/consistency/ collects and analyses real ones"
LONG_RUN = "a real 45-step run and its report (about 20 s); the same pipeline as the grpo gate's sample"
FUZZ = "the fuzz suite: a tier of the suite (tests/fuzz); the nightly profile runs for many minutes"
OWN_COMMITS = ("the documented A/B of a project's own commits, in that project's root (minutes of CPU); "
               "tests/integration/test_ab_own_commits.py runs the flow on a real two-branch repository (slow)")
PLACEHOLDER = "a form with placeholders (a case file, a work dir of the reader's run), not a command to paste"

SKIPPED: dict[str, str] = {
    "bash scripts/bootstrap.sh && .venv/bin/python -m pytest -m grpo": INSTALLS,
    "bash scripts/bootstrap.sh --all && .venv/bin/python -m pytest -n auto": INSTALLS,
    "bash scripts/bootstrap.sh --all": INSTALLS,
    '.venv/bin/python -m pytest -m "not slow" -n auto': QUICK_TIER,
    ".venv/bin/python -m pytest tests/unit": UNIT_TIER,
    ".venv/bin/python -m mkdocs build --strict -d site": MKDOCS,
    ".venv/bin/python -m mkdocs build --strict": MKDOCS,
    ".venv/bin/python -m mkdocs serve": SERVER,
    "pip install '/path/to/rl-autotest[tensorboard]'": USER_REPO,
    "rl-autotest init trl-grpo -- {python} train.py --output-dir {work_dir} --seed {seed}": TRL,
    "rl-autotest calibrate trl-grpo": TRL,
    "rl-autotest baseline promote trl-grpo": PROMOTE,
    "pytest -m grpo": GRPO_GATE,
    'git add accuracy && git commit -m "accuracy case proposed by rl-autotest init"': USER_REPO,
    'git add accuracy && git commit -m "trl-grpo baseline calibrated on seeds 1-10"': USER_REPO,
    "rl-autotest calibrate tiny-grpo --paired --runs 10 --promote": CALIBRATION,
    "rl-autotest ab tiny-grpo --base clean --head fault:lr-scale:0.5 --replicates 3": AB,
    "export MINI_ROOT=$PWD": OWN_COMMITS,
    "rl-autotest calibrate mini --runs 3 --jobs 1 --promote": OWN_COMMITS,
    "rl-autotest calibrate mini --paired --runs 2 --promote": OWN_COMMITS,
    "rl-autotest ab mini --base main --head halve-lr --seeds 11 --no-plots": OWN_COMMITS,
    "rl-autotest ab tiny-grpo --base clean --head fault:lr-scale:0.5 --split": AB,
    'pytest -m grpo --ab-base main --framework-ref "$PR_SHA"': GPU,
    'pytest -m grpo --ab-base main --framework-ref "$PR_SHA" --ab-split': GPU,
    'rl-autotest baseline promote tiny-grpo --shadow "mismatch/mismatch_k3_kl[final]" --nights 7': PROMOTE,
    "rl-autotest calibrate tiny-grpo": CALIBRATION,
    "rl-autotest baseline promote tiny-grpo --to-shadow": PROMOTE,
    "rl-autotest baseline promote tiny-grpo --from-shadow --nights 7": PROMOTE,
    "rl-autotest baseline promote tiny-grpo": PROMOTE,
    "rl-autotest consistency results/tiny-grpo/<run>": DUMPS,
    "pytest -m grpo --strict-cases --framework-repo https://github.com/InternLM/xtuner.git "
    "--framework-ref refs/pull/1234/head": NETWORK,
    "python -m pytest tests/fuzz": FUZZ,
    "HYPOTHESIS_PROFILE=nightly python -m pytest tests/fuzz -n auto": FUZZ,
    "rl-autotest run tiny-grpo --yes": LONG_RUN,
    "bash scripts/gpu_check.sh --wheels": INSTALLS,
    "bash scripts/gpu_check.sh": "needs a CUDA GPU (docs/gpu-runners.md, GPU check)",
    "bash scripts/gpu_check.sh --cpu": "two real 45-step runs and a consistency job: minutes of CPU",
    "bash scripts/gpu_check.sh --dry-run": "tests/integration/test_gpu_check.py runs it",
    "rl-autotest run path/to/my-case.yaml --seed 7 --fault lr-x10 --yes": PLACEHOLDER,
    "rl-autotest compare --baseline baselines/mopd-qwen3-vl-2b.yaml --current $WORK_DIR --out results/mopd-check":
        PLACEHOLDER,
}
# the consistency-analyze page's two forms: real dumps of a real run (their flags are still parsed below)
SKIPPED_PREFIXES: dict[str, str] = {"rl-autotest consistency analyze ": DUMPS}


@dataclass(frozen=True)
class Run:
    """A command run here: the exit codes it may end with, and a text its output must hold."""

    exits: tuple[int, ...] = (0,)
    prints: str = ""


RUN: dict[str, Run] = {
    "rl-autotest run tiny-grpo --dry-run": Run(prints="tiny-grpo: DRY-RUN"),
    "rl-autotest history ingest results/": Run(prints="recorded"),
    "rl-autotest history show tiny-grpo [--metric M]": Run(prints="tiny-grpo"),
    "rl-autotest history drift [--case tiny-grpo]": Run(exits=(0, 1), prints="tiny-grpo"),
    "rl-autotest history dashboard --out results/dashboard": Run(prints="dashboard: "),
    "rl-autotest history promote-ready --nights 7": Run(exits=(0, 1)),
    "rl-autotest history fleet --nights 7": Run(exits=(0, 1)),
    "rl-autotest history promote-ready --case tiny-grpo --nights 7": Run(exits=(0, 1)),
    "rl-autotest history promote-ready --case tiny-grpo --nights 7 --allowed 0": Run(exits=(0, 1)),
}


def page_commands() -> dict[str, list[str]]:
    """Every command of every ```bash block: command → the pages that show it."""
    found: dict[str, list[str]] = {}
    for page in PAGES:
        for block in BLOCK.finditer(page.read_text(encoding="utf-8")):
            for line in block.group(1).replace("\\\n", " ").splitlines():
                command = " ".join(line.split(" #")[0].split()) if not line.lstrip().startswith("#") else ""
                if command:
                    found.setdefault(command, []).append(page.relative_to(ROOT).as_posix())
    return found


def declared(command: str) -> str | Run | None:
    if command in RUN:
        return RUN[command]
    if command in SKIPPED:
        return SKIPPED[command]
    return next((why for prefix, why in SKIPPED_PREFIXES.items() if command.startswith(prefix)), None)


def test_every_command_a_page_shows_is_declared() -> None:
    shown = page_commands()
    assert len(shown) > 30  # the extraction finds the pages' commands
    undeclared = [f"{pages[0]}: {command}" for command, pages in shown.items() if declared(command) is None]
    assert not undeclared, ("commands no test runs and none is declared skipped: add each to RUN (a cheap one) or "
                            "SKIPPED (with the reason) in tests/integration/test_docs_commands.py:\n"
                            + "\n".join(undeclared))
    stale = [c for c in (*RUN, *SKIPPED) if c not in shown]
    assert not stale, f"declared commands no page shows any longer: {stale}"
    assert not set(RUN) & set(SKIPPED)


def _argv(command: str, optional: bool = True) -> list[str]:
    """A shown command as an argv: optional ``[...]`` parts taken in (or left out), placeholders given a value."""
    command = re.sub(r"\[(--[^\]]+)\]", r"\1" if optional else "", command)
    command = command.replace("$PR_SHA", "0" * 40).replace("$WORK_DIR", "work").replace("<run>", "run")
    return shlex.split(command)


def _rl_autotest(command: str, optional: bool = True) -> list[str] | None:
    for part in command.split("&&"):
        argv = _argv(part.strip(), optional)
        if argv and argv[0] == "rl-autotest":
            return argv[1:]
    return None


@pytest.mark.parametrize("command", sorted(c for c in page_commands() if _rl_autotest(c) is not None))
def test_every_rl_autotest_command_parses(command: str) -> None:
    """Run or skipped, its flags are the command's: the real parser reads it (nothing runs)."""
    argv = _rl_autotest(command)
    assert argv is not None
    if "--" in argv:  # the launch command after `--` (init's) is split off before parsing, as main() does
        argv = argv[:argv.index("--")]
    if argv[:2] == ["consistency", "analyze"]:
        from autotest.consistency.cli import build_parser as analyze_parser

        parser, argv = analyze_parser(), argv[2:]
    else:
        from autotest.cli import build_parser

        parser = build_parser(argv[0])
    try:
        parser.parse_args(argv)
    except SystemExit as stop:  # argparse's way to refuse: exit 2 and a usage line on stderr
        pytest.fail(f"`{command}`: the parser refused it (exit {stop.code})")


def test_every_pytest_flag_a_page_names_is_an_option() -> None:
    flags = sorted({flag for command in page_commands() for part in command.split("&&")
                    if "pytest" in _argv(part.strip())[:4]
                    for flag in re.findall(r"(?<!\S)(--[a-z][a-z-]+)", part)})
    assert "--strict-cases" in flags and "--ab-base" in flags
    shown = waits.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"], cwd=ROOT,
                      capture_output=True, text=True, limit_s=120).stdout
    missing = [flag for flag in flags if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", shown)]
    assert not missing, f"pytest flags the docs name that pytest --help does not list: {missing}"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of its own with a results root holding twelve fixture nights of a case named tiny-grpo."""
    from tests.unit.history.builders import write_nightlies

    folder = tmp_path_factory.mktemp("docs-commands")
    write_nightlies(folder / "results", "tiny-grpo", nights=12, shift_at=8, seed=5)
    return folder


def _ordered() -> list[str]:
    """RUN in an order that works: the history is filled before it is read."""
    return sorted(RUN, key=lambda c: (" ingest " not in c, c))


def test_the_cheap_commands_run_as_the_pages_show_them(workspace: Path) -> None:
    env = {**os.environ, "RL_AUTOTEST_RESULTS": str(workspace / "results"), "NO_COLOR": "1"}
    env.pop("RL_AUTOTEST_HISTORY", None)
    for command in _ordered():
        expected = RUN[command]
        done = waits.run([sys.executable, "-m", "autotest.cli", *_rl_autotest(command, optional=False)], cwd=workspace,
                         env=env, capture_output=True, text=True, limit_s=120)
        out = done.stdout + done.stderr
        assert done.returncode in expected.exits, f"`{command}` exited {done.returncode}:\n{out[-2000:]}"
        assert "Traceback" not in out, f"`{command}`:\n{out[-2000:]}"
        assert expected.prints in out, f"`{command}` did not print {expected.prints!r}:\n{out[-2000:]}"
    assert (workspace / "results" / "dashboard" / "index.html").is_file()


def test_each_sample_mark_sits_on_a_block_of_a_declared_page() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import doc_samples
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    for name, sample in doc_samples.SAMPLES.items():
        for page in sample.pages:
            shown = doc_samples.blocks(ROOT / page).get(name)
            assert shown, f"{page}: no `<!-- sample: {name} -->` block"
            assert str(ROOT) not in shown and "/work/" not in shown  # no path from the machine that wrote it


@pytest.mark.slow
def test_the_generated_samples_are_what_the_commands_print() -> None:
    """The pages' samples against a fresh run of their commands (the grpo gate: a real 45-step run)."""
    done = waits.run([sys.executable, str(ROOT / "scripts" / "doc_samples.py"), "--check"], cwd=ROOT,
                     capture_output=True, text=True, limit_s=900)
    assert done.returncode == 0, done.stderr[-4000:]
