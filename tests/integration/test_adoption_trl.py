"""Adoption, as a new user does it: a trainer nobody here wrote (TRL's GRPOTrainer, examples/trl-grpo), in its
own git repository outside this checkout, gated by rl-autotest installed from a wheel into a fresh venv.

    rl-autotest init -> rl-autotest calibrate --runs 3 -> rl-autotest baseline promote -> pytest -m grpo

must PASS on seed 0 (the calibration runs use seeds 1-3 of the ten init lists: --runs 3 as in
docs/own-trainer.md's example, to keep the suite's longest test at three TRL runs) and FAIL on learning rate x 0.1 ($GRPO_LR_SCALE); the
harness's checkout and the installed package are byte-for-byte unchanged afterwards. The venv sees the
test interpreter's site-packages (torch, transformers, trl) through a plain path line in a .pth file, which
does not run the editable-install finder that lives there, and gets the wheel with --no-deps.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.wheels import build_wheel, commit_all, user_env
from tests import waits

pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "examples" / "trl-grpo"
PROJECT_FILES = ("train.py", "pyproject.toml", ".gitignore")


#: the checkout's parts the adoption path could write into by mistake (the package, the example, the goldens)
WATCHED = ("autotest", "examples", "baselines", "pyproject.toml")


def _tree_digest(root: Path) -> str:
    """sha256 over the watched tracked and untracked-not-ignored files of the checkout (path and bytes)."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "-co", "--exclude-standard", "--", *WATCHED],
                            capture_output=True, check=True).stdout.split(b"\0")
    digest = hashlib.sha256()
    for name in sorted(n for n in listed if n):
        path = root / name.decode()
        if path.is_file():
            digest.update(name + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _package_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _venv_with_wheel(tmp: Path) -> Path:
    """A fresh venv holding the harness as a built wheel (not editable); the heavy packages come from ours."""
    wheel = build_wheel(tmp)
    venv = tmp / "venv"
    waits.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, limit_s=120)
    python = venv / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    (purelib / "shared_site_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    waits.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
               str(wheel)], check=True, capture_output=True, limit_s=300)
    return venv


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess:
    return waits.run(args, cwd=cwd, env=env, capture_output=True, text=True, limit_s=timeout)


def test_a_trl_project_is_gated_from_a_wheel_in_five_commands(tmp_path: Path) -> None:
    pytest.importorskip("trl", reason="the TRL example needs the trl extra: pip install -e '.[trl]'")
    harness_before = _tree_digest(ROOT)
    venv = _venv_with_wheel(tmp_path)
    env = user_env(venv)
    where = _run([str(venv / "bin" / "python"), "-c", "import autotest; print(autotest.__file__)"], tmp_path, env)
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr
    package = Path(where.stdout.strip()).parent
    package_before = _package_digest(package)

    project = tmp_path / "my-trainer"
    (project / "accuracy" / "cases").mkdir(parents=True)
    for name in PROJECT_FILES:
        shutil.copy(EXAMPLE / name, project / name)
    subprocess.run(["git", "init", "-q", str(project)], check=True, env=env)
    commit_all(project, env, "my trainer")
    cli = str(venv / "bin" / "rl-autotest")

    init = _run([cli, "init", "trl-grpo", "--", "{python}", "train.py", "--output-dir", "{work_dir}",
                 "--seed", "{seed}"], project, env)
    assert init.returncode == 0, init.stdout + init.stderr
    assert "reward[pooled]" in init.stdout and init.stdout.splitlines()[-1] == "next: rl-autotest calibrate trl-grpo"
    commit_all(project, env, "accuracy case proposed by rl-autotest init")

    calibrate = _run([cli, "calibrate", "trl-grpo", "--runs", "3"], project, env, timeout=900)
    assert calibrate.returncode == 0, calibrate.stdout + calibrate.stderr
    assert "reward[pooled]: placeholder -> " in calibrate.stdout
    promote = _run([cli, "baseline", "promote", "trl-grpo"], project, env)
    assert promote.returncode == 0, promote.stdout + promote.stderr
    commit_all(project, env, "trl-grpo baseline calibrated on seeds 1-3")

    # the clean seed and the regression side by side (two cores): each run gets its own results folder
    pytest_args = [str(venv / "bin" / "python"), "-m", "pytest", "-m", "grpo", "-p", "no:cacheprovider", "-q"]
    runs = {name: subprocess.Popen(pytest_args, cwd=project, env=run_env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
            for name, run_env in (("clean", env), ("lr x 0.1", user_env(venv, GRPO_LR_SCALE="0.1")))}
    outputs = {name: waits.communicate(proc, 600)[0] for name, proc in runs.items()}
    assert runs["clean"].returncode == 0, outputs["clean"]
    assert "trl-grpo: PASS" in outputs["clean"] and "1 passed" in outputs["clean"]
    assert runs["lr x 0.1"].returncode == 1, outputs["lr x 0.1"]
    assert "trl-grpo: FAIL" in outputs["lr x 0.1"] and "1 failed" in outputs["lr x 0.1"]

    assert _tree_digest(ROOT) == harness_before  # nothing written into the harness checkout
    assert not (ROOT / "results" / "trl-grpo").exists()  # nor into its (ignored) demo results root
    assert _package_digest(package) == package_before  # nor into the installed package
    assert len(list((project / "accuracy" / "results" / "trl-grpo").glob("*/results.json"))) == 2
