"""Project mode: the table is found from the working directory upwards; each mistake is one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from autotest.cli import main
from autotest.errors import UsageError
from autotest.inputs.case import CASES_DIR, case_argument, list_cases, load_case
from autotest.inputs.project import PROJECT_ENV, find_project
from autotest.run.results_dir import RESULTS_ENV, default_results_root

TABLE = """[tool.rl-autotest]
cases = ["accuracy/cases"]
baselines = "accuracy/baselines"
results = "accuracy/results"
"""

CASE = """name: {name}
description: d
markers: [grpo]
goal: g
minimal_scale: m
platform: {{gpus: 0, framework: null}}
launch:
  command: ["{{python}}", train.py, --seed, "{{seed}}"]
  timeout_s: 10
tracker: {{format: xtuner}}
expected: {{steps: 3}}
{extra}"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder with one case and the working directory in a subfolder of it."""
    root = tmp_path / "fw"
    (root / "accuracy" / "cases").mkdir(parents=True)
    (root / "accuracy" / "baselines").mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "fw"\n\n' + TABLE)
    (root / "accuracy" / "cases" / "mine.yaml").write_text(CASE.format(name="mine", extra=""))
    (root / "src").mkdir()
    monkeypatch.chdir(root / "src")
    monkeypatch.delenv(PROJECT_ENV, raising=False)
    monkeypatch.delenv(RESULTS_ENV, raising=False)
    return root


def test_the_table_is_found_from_a_subfolder_and_its_paths_are_the_projects(project: Path) -> None:
    found = find_project()
    assert found is not None
    assert found.root == project and found.source == project / "pyproject.toml"
    assert found.cases == (project / "accuracy" / "cases",)
    assert found.baselines == project / "accuracy" / "baselines"
    assert found.results == project / "accuracy" / "results"
    assert found.history is None and found.framework is None  # not a git repository
    assert default_results_root() == project / "accuracy" / "results"


def test_a_project_case_resolves_against_the_project(project: Path) -> None:
    case = load_case("mine")
    assert case.source == project / "accuracy" / "cases" / "mine.yaml"
    assert case.baseline_path == project / "accuracy" / "baselines" / "mine.yaml"  # omitted: the project's
    assert case.repo_root == project  # {repo} and the default launch.cwd
    assert [c.name for c in list_cases()] == ["mine"]  # exactly the project's cases
    assert "tiny-grpo" in [c.name for c in list_cases(packaged=True)]
    assert load_case("tiny-grpo").source.parent == CASES_DIR  # a packaged case by name still works
    assert case_argument(case) == "mine"


def test_relative_paths_in_a_case_resolve_against_its_folder(project: Path) -> None:
    path = project / "accuracy" / "cases" / "rel.yaml"
    path.write_text(CASE.format(name="rel", extra="baseline: ../golden/rel.yaml\n"))
    assert load_case(path).baseline_path == project / "accuracy" / "golden" / "rel.yaml"
    path.write_text(CASE.format(name="rel", extra="baseline: /share/golden/rel.yaml\n"))
    assert load_case(path).baseline_path == Path("/share/golden/rel.yaml")  # absolute: as written


def test_the_framework_checkout_defaults_to_the_projects_git_repository(project: Path) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    found = find_project()
    assert found is not None and found.framework == project
    assert load_case("mine").framework_checkout == project


def test_a_sqlite_history_is_relative_to_the_table(project: Path) -> None:
    (project / "pyproject.toml").write_text(TABLE + 'history = "sqlite:///accuracy/results/h.sqlite"\n')
    found = find_project()
    assert found is not None and found.history == f"sqlite:///{project / 'accuracy' / 'results' / 'h.sqlite'}"


def test_without_a_table_the_packaged_demo_cases_are_listed(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\n')  # no [tool.rl-autotest]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(PROJECT_ENV, raising=False)
    assert find_project() is None
    assert "tiny-grpo" in [c.name for c in list_cases()]


def test_the_environment_names_the_project(project: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(PROJECT_ENV, str(project / "pyproject.toml"))
    found = find_project()
    assert found is not None and found.root == project


def _one_line(exc: pytest.ExceptionInfo[UsageError]) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("table, expected", [
    ('[tool.rl-autotest]\ncases = ["accuracy/cases"]\nresults = "r"\n',
     "pyproject.toml: tool.rl-autotest.baselines: required key is missing; add it"),
    (TABLE + 'result = "x"\n', "pyproject.toml: tool.rl-autotest.result: unknown key; did you mean 'results'?"),
    (TABLE.replace('["accuracy/cases"]', '"accuracy/cases"'),
     "pyproject.toml: tool.rl-autotest.cases: 'accuracy/cases' is a text, not a list of folders"),
    (TABLE.replace('"accuracy/results"', "3"), "pyproject.toml: tool.rl-autotest.results: 3 is not a non-empty text"),
    (TABLE.replace('["accuracy/cases"]', '["../elsewhere"]'),
     "pyproject.toml: tool.rl-autotest.cases[0]: '../elsewhere' is outside the project"),
    (TABLE.replace('["accuracy/cases"]', '["nothing-here"]'), "tool.rl-autotest.cases[0]:"),
    (TABLE.replace('["accuracy/cases"]', "[]"), "tool.rl-autotest.cases: the list is empty"),
    ("[tool.rl-autotest\n", "pyproject.toml: not valid TOML"),
    ("[tool.rl_autotest]\ncases = []\n", "tool.rl_autotest: the table is named [tool.rl-autotest]; rename it"),
])
def test_each_mistake_in_the_table_is_one_line_naming_file_and_key(project: Path, table: str,
                                                                   expected: str) -> None:
    (project / "pyproject.toml").write_text(table)
    with pytest.raises(UsageError) as info:
        find_project()
    assert expected in _one_line(info)


def test_two_project_files_in_one_folder_are_refused(project: Path) -> None:
    (project / "rl-autotest.toml").write_text(TABLE.replace("[tool.rl-autotest]\n", ""))
    with pytest.raises(UsageError) as info:
        find_project()
    assert "two project tables in one folder" in _one_line(info)


def test_rl_autotest_toml_holds_the_same_keys_at_its_top(project: Path) -> None:
    (project / "pyproject.toml").unlink()
    (project / "rl-autotest.toml").write_text(TABLE.replace("[tool.rl-autotest]\n", ""))
    found = find_project()
    assert found is not None and found.source == project / "rl-autotest.toml"
    (project / "rl-autotest.toml").write_text(TABLE.replace("[tool.rl-autotest]\n", "") + "case = 1\n")
    with pytest.raises(UsageError) as info:
        find_project()
    assert "rl-autotest.toml: case: unknown key; did you mean 'cases'?" in _one_line(info)


def test_a_case_name_in_both_project_and_package_is_refused(project: Path) -> None:
    (project / "accuracy" / "cases" / "tiny-grpo.yaml").write_text(CASE.format(name="tiny-grpo", extra=""))
    with pytest.raises(UsageError) as info:
        load_case("mine")
    assert "case 'tiny-grpo' is also" in _one_line(info) and "(project and package)" in str(info.value)


def test_an_unknown_case_names_where_it_looked(project: Path) -> None:
    with pytest.raises(UsageError) as info:
        load_case("nope")
    message = _one_line(info)
    assert "nope: no such case; known cases: " in message and ", mine, " in message and str(project / "accuracy" / "cases") in message


@pytest.mark.parametrize("value, expected", [
    ("", "$RL_AUTOTEST_PROJECT is set but empty"),
    ("/nonexistent/pyproject.toml", "does not exist"),
])
def test_a_bad_project_variable_is_one_line(project: Path, monkeypatch, value: str, expected: str) -> None:
    monkeypatch.setenv(PROJECT_ENV, value)
    with pytest.raises(UsageError) as info:
        find_project()
    assert expected in _one_line(info)


def test_an_empty_results_variable_is_an_error_not_a_fallback(project: Path, monkeypatch) -> None:
    monkeypatch.setenv(RESULTS_ENV, " ")
    with pytest.raises(UsageError) as info:
        default_results_root()
    assert "$RL_AUTOTEST_RESULTS is set but empty" in _one_line(info)


def test_a_case_outside_any_project_is_named_by_its_path_in_printed_commands(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(PROJECT_ENV, raising=False)
    path = tmp_path / "loose.yaml"
    path.write_text(CASE.format(name="loose", extra="baseline: b.yaml\n"))
    case = load_case(path)
    assert case.baseline_path == tmp_path / "b.yaml"
    assert case_argument(case) == str(path)


def test_cases_in_a_project_without_case_files_is_one_line(project: Path, capsys) -> None:
    (project / "accuracy" / "cases" / "mine.yaml").unlink()
    assert main(["cases"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no case files (*.yaml) in" in err[0] and "rl-autotest init" in err[0]


def test_an_rl_autotest_toml_nesting_its_keys_under_the_pyproject_header_says_where_they_go(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROJECT_ENV, raising=False)
    (tmp_path / "accuracy" / "cases").mkdir(parents=True)
    (tmp_path / "rl-autotest.toml").write_text('[tool.rl-autotest]\ncases = ["accuracy/cases"]\n'
                                               'baselines = "accuracy/baselines"\nresults = "accuracy/results"\n')
    with pytest.raises(UsageError) as caught:
        find_project(tmp_path)
    assert _one_line(caught) == (f"{tmp_path / 'rl-autotest.toml'}: [tool.rl-autotest]: in rl-autotest.toml the "
                                 "keys go at the top level (cases = [...], baselines = ..., results = ...), without "
                                 "the table header a pyproject.toml needs; remove the [tool.rl-autotest] line")
