"""Nothing from outside becomes an option or a command on the way to git: refs and repositories from the
command line, the environment and the case file are checked, and an empty one is an error, never HEAD.

A real git repository made by the test stands in for the framework (the fixtures of
test_framework_checkout); every hostile value is tried for real and the file it would create must not exist.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.cli import main
from autotest.errors import UsageError
from autotest.inputs.case import load_case
from autotest.run.framework import REF_ENV, REPO_ENV, FrameworkRequest, checkout, framework_request
from tests.integration.run.test_framework_checkout import _run, case_and_baseline, framework  # noqa: F401


def _hostile(tmp_path: Path) -> tuple[Path, list[str]]:
    marker = tmp_path / "PWNED"
    return marker, [f"--upload-pack=touch {marker}", f"--upload-pack=touch${{IFS}}{marker}", f"-o{marker}",
                    f"$(touch {marker})", f"main;touch${{IFS}}{marker}", f"`touch {marker}`", f"+main:refs/x",
                    "main:refs/heads/evil", "HEAD~1", "a b", "@"]


def test_an_option_or_shell_shaped_ref_is_refused_and_runs_nothing(case_and_baseline, tmp_path):  # noqa: F811
    case, baseline = case_and_baseline
    marker, values = _hostile(tmp_path)
    for value in values:
        with pytest.raises(UsageError) as info:
            _run(case, baseline, tmp_path, framework_ref=value)
        message = str(info.value)
        assert "\n" not in message, message
        # refused up front, or (a name git allows, e.g. with ';') fetched as a name, never run
        assert message.startswith("--framework-ref: ") and "is not a ref name" in message or \
            message.startswith("framework fakefw: no branch, tag or ref "), message
        assert not marker.exists(), value


def test_checkout_passes_the_ref_after_end_of_options(framework, tmp_path):  # noqa: F811
    """Even a request built without framework_request (no check) cannot smuggle an option into git fetch."""
    marker = tmp_path / "PWNED"
    request = FrameworkRequest("fakefw", "FAKEFW_ROOT", framework["repo"], f"--upload-pack=touch {marker}", "test")
    with pytest.raises(UsageError) as info:
        checkout(request, tmp_path / "cache")
    assert "invalid refspec" in str(info.value) and not marker.exists()


@pytest.mark.parametrize("repo", ["--upload-pack=touch {marker}", "ext::sh -c touch% {marker}",
                                  "ext://sh -c touch {marker}"])
def test_an_option_or_command_shaped_repository_is_refused_and_runs_nothing(case_and_baseline, tmp_path,  # noqa: F811
                                                                          repo):
    case, baseline = case_and_baseline
    marker = tmp_path / "PWNED"
    with pytest.raises(UsageError) as info:
        _run(case, baseline, tmp_path, framework_repo=repo.format(marker=marker))
    assert "\n" not in str(info.value)
    assert not marker.exists()


@pytest.mark.parametrize("flag, env, line", [
    ({"ref": ""}, {}, "--framework-ref is empty (an empty value never means the default); name a branch, tag, "
                      "full sha or refs/pull/N/head, or drop the flag"),
    ({"ref": "  "}, {}, "--framework-ref is empty"),
    ({"repo": ""}, {}, "--framework-repo is empty (an empty value never means the default); give a repository "
                       "URL or path, or drop the flag"),
    ({}, {REF_ENV: ""}, f"{REF_ENV} is empty (an empty value never means the default); name a branch, tag, full "
                        "sha or refs/pull/N/head, or unset it"),
    ({}, {REPO_ENV: ""}, f"{REPO_ENV} is empty"),
])
def test_an_empty_ref_or_repository_is_an_error_never_head(case_and_baseline, flag, env, line):  # noqa: F811
    case, _ = case_and_baseline
    with pytest.raises(UsageError) as info:
        framework_request(case, env, **flag)
    assert str(info.value).startswith(line)


def test_an_empty_flag_for_a_case_without_a_framework_is_still_an_error():
    with pytest.raises(UsageError, match="^--framework-ref is empty"):
        framework_request(load_case("tiny-grpo"), {}, ref="")
    # the environment is shared by every case of a CI job: it only matters to framework cases
    assert framework_request(load_case("tiny-grpo"), {REF_ENV: ""}) is None


@pytest.mark.parametrize("written, line", [
    ("ref:", "platform.framework.ref: is empty; write the ref to test, or remove the key"),
    ('ref: ""', "platform.framework.ref: '' is not a non-empty text"),
    ("repo:", "platform.framework.repo: is empty; write the repo to test, or remove the key"),
])
def test_an_empty_ref_in_the_case_file_is_one_line(case_and_baseline, written, line):  # noqa: F811
    case, _ = case_and_baseline
    text = case.source.read_text()
    key = written.split(":")[0]
    start = text.index(f"{key}: ", text.index("framework:"))
    end = min(i for i in (text.index(",", start), text.index("}", start)) if i > 0)
    case.source.write_text(text[:start] + written + (" null" if written.endswith(":") else "") + text[end:])
    with pytest.raises(UsageError) as info:
        load_case(case.source)
    assert str(info.value).startswith(f"{case.source}: {line}")


def test_a_ref_from_the_case_file_is_checked_naming_the_file(case_and_baseline, tmp_path):  # noqa: F811
    case, baseline = case_and_baseline
    marker = tmp_path / "PWNED"
    case.source.write_text(case.source.read_text().replace("ref: main", f'ref: "--upload-pack=touch {marker}"'))
    with pytest.raises(UsageError) as info:
        _run(load_case(case.source), baseline, tmp_path)
    assert str(info.value).startswith(f"{case.source}: platform.framework.ref: ")
    assert not marker.exists()


def test_an_environment_ref_is_checked_naming_the_variable(case_and_baseline, tmp_path, monkeypatch):  # noqa: F811
    case, baseline = case_and_baseline
    monkeypatch.setenv(REF_ENV, "--upload-pack=touch x")
    with pytest.raises(UsageError, match=f"^{REF_ENV}: '--upload-pack=touch x' is not a ref name"):
        _run(case, baseline, tmp_path)


def test_an_unknown_commit_is_named_in_one_line(case_and_baseline, framework, tmp_path):  # noqa: F811
    case, baseline = case_and_baseline
    sha = "0123456789abcdef0123456789abcdef01234567"
    with pytest.raises(UsageError) as info:
        _run(case, baseline, tmp_path, framework_ref=sha)
    assert str(info.value) == (f"framework fakefw: commit {sha} is not in {framework['repo']}; check the sha "
                               "(was the branch force-pushed?)")
    with pytest.raises(UsageError) as info:
        _run(case, baseline, tmp_path, framework_ref=framework["bad"][:10])
    assert "(a short sha is not fetched: give all 40 hex digits)" in str(info.value)


def test_the_cli_refuses_an_option_shaped_ref_in_one_line(case_and_baseline, tmp_path, capsys):  # noqa: F811
    case, _ = case_and_baseline
    marker = tmp_path / "PWNED"
    code = main(["run", str(case.source), "--yes", "--no-history", "--results-dir", str(tmp_path / "r"),
                 "--framework-ref", f"--upload-pack=touch {marker}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("rl-autotest: error: --framework-ref: ")
    assert not marker.exists()
