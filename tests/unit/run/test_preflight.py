"""Preflight's input check: the paths a case names, missing and present (no git, no process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.case import REPO_ROOT, load_case
from autotest.run.preflight import check_inputs, require_inputs
from tests.helpers import DATA


def inputs_case(tmp_path: Path) -> Path:
    text = (DATA / "bad_cases" / "timeout_zero.yaml").read_text()
    path = tmp_path / "inp.yaml"
    path.write_text(text.replace("name: timeout_zero", "name: inp").replace("timeout_s: 0", "timeout_s: 5")
                    + "inputs:\n  model: ${RL_T_SHARE}/model\n  data: ${RL_T_SHARE}/data.jsonl\n"
                    "  teacher: ${RL_T_UNSET}/teacher\n  readme: '{repo}/pyproject.toml'\n")
    return path


def test_inputs_missing_and_present(tmp_path: Path) -> None:
    case = load_case(inputs_case(tmp_path))
    share = tmp_path / "share"
    (share / "model").mkdir(parents=True)
    env = {"RL_T_SHARE": str(share)}
    missing = check_inputs(case, env)
    assert [(m.name, m.path, m.reason) for m in missing] == [
        ("data", f"{share}/data.jsonl", "does not exist"),
        ("teacher", None, "RL_T_UNSET is not set")]
    with pytest.raises(UsageError) as info:
        require_inputs(case, env)
    assert str(info.value) == (
        f"{case.source}: inputs: 2 missing: data={share}/data.jsonl (does not exist), "
        "teacher=${RL_T_UNSET}/teacher (RL_T_UNSET is not set); "
        "export the share roots or fix the paths, then rerun")


def test_require_inputs_passes_when_all_exist(tmp_path: Path) -> None:
    case = load_case(inputs_case(tmp_path))
    share = tmp_path / "share"
    for sub in ("model", "teacher"):
        (share / sub).mkdir(parents=True)
    (share / "data.jsonl").write_text("{}\n")
    paths = require_inputs(case, {"RL_T_SHARE": str(share), "RL_T_UNSET": str(share)})
    assert paths == {"model": share / "model", "data": share / "data.jsonl",
                     "teacher": share / "teacher", "readme": REPO_ROOT / "pyproject.toml"}


# ---------------------------------------------------------------- redaction


def test_a_long_diff_stat_keeps_its_first_files_and_its_summary() -> None:
    from autotest.run.preflight import DIFF_STAT_FILES, shortened_diff_stat

    files = [f" f{i}.py | 2 +-" for i in range(DIFF_STAT_FILES + 5)]
    stat = "\n".join([*files, " 25 files changed, 25 insertions(+), 25 deletions(-)"])
    short = shortened_diff_stat(stat).splitlines()
    assert short[:DIFF_STAT_FILES] == files[:DIFF_STAT_FILES]
    assert short[DIFF_STAT_FILES:] == [" ... and 5 more files", " 25 files changed, 25 insertions(+), 25 deletions(-)"]
    small = "\n".join([*files[:3], " 3 files changed"])
    assert shortened_diff_stat(small) == small
