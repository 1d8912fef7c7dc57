"""``consistency analyze`` on real MSProbe tensor dumps, each broken one way: exit 2 and one line naming the
file, never a traceback (issue 19.4). The intact pair is analysed first, so every failure below is the
broken file's, not the fixture's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autotest.consistency.cli import main
from tests.shared_build import content_key, shared_build

from .scenarios import collect, perturb_mlp

MLP = "Module.model.layers.1.mlp.down_proj.Linear.forward.0"


class NotATensor:
    """A pickled object that weights_only loading must refuse (it would run code on load)."""


@pytest.fixture(scope="module")
def tensor_dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tensor dump of layers.1.mlp, made once per session (the tests copy before they break it)."""
    def build(root: Path) -> None:
        collect(root / "run", perturb_mlp, task="tensor", module_list=("model.layers.1.mlp.",))

    return shared_build(tmp_path_factory, "malformed-tensor", content_key("layers.1.mlp"), build) / "run"


def _copy(tensor_dump: Path, tmp_path: Path) -> tuple[Path, Path]:
    """This test's own (train, rollout) dump folders: one forward each, dump.json at their top."""
    sides = []
    for side in ("actor", "rollout"):
        (src,) = (tensor_dump / side / "dump" / "forward_0000").glob("step*/*")
        sides.append(Path(shutil.copytree(src, tmp_path / side)))
    return sides[0], sides[1]


def _analyze(capsys, train: Path, rollout: Path, out: Path, *extra: str) -> tuple[int, str]:
    code = main(["--train-dump", str(train), "--rollout-dump", str(rollout), "--out", str(out), *extra])
    return code, capsys.readouterr().err


def _pt(side: Path, leaf: str = "output.0") -> Path:
    return side / "dump_tensor_data" / f"{MLP}.{leaf}.pt"


def _one_line(code: int, err: str, *names: object) -> None:
    assert code == 2 and err.count("\n") == 1, err
    for name in names:
        assert str(name) in err, err


def test_the_intact_dump_is_analysed(tensor_dump, tmp_path, capsys):
    train, rollout = _copy(tensor_dump, tmp_path)
    code, err = _analyze(capsys, train, rollout, tmp_path / "out")
    assert code == 0 and err == "", err
    assert (tmp_path / "out" / "output_5_root_cause_report.md").is_file()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_a_corrupt_tensor_file_is_one_line_naming_it(tensor_dump, tmp_path, capsys, damage):
    train, rollout = _copy(tensor_dump, tmp_path)
    pt = _pt(rollout)
    data = pt.read_bytes()
    pt.write_bytes({"garbage": b"\x80\x02not a pickle" * 20, "truncated": data[: len(data) // 2], "empty": b""}[damage])
    code, err = _analyze(capsys, train, rollout, tmp_path / "out")
    _one_line(code, err, pt, "not a loadable tensor file", "--statistics-only")


def test_a_pickle_that_would_run_code_is_refused_by_weights_only(tensor_dump, tmp_path, capsys):
    import torch

    train, rollout = _copy(tensor_dump, tmp_path)
    pt = _pt(train)
    torch.save({"payload": NotATensor()}, pt)
    code, err = _analyze(capsys, train, rollout, tmp_path / "out")
    _one_line(code, err, pt, "not a loadable tensor file (UnpicklingError")


def test_a_missing_tensor_file_is_one_line_naming_it_and_its_dump_json(tensor_dump, tmp_path, capsys):
    train, rollout = _copy(tensor_dump, tmp_path)
    pt = _pt(train, "parameters.weight")
    pt.unlink()
    code, err = _analyze(capsys, train, rollout, tmp_path / "out")
    _one_line(code, err, pt, "tensor file missing", train / "dump.json", "parameters.weight")
    # the statistics pass never opens it
    code, err = _analyze(capsys, train, rollout, tmp_path / "out", "--statistics-only")
    assert code == 0, err


@pytest.mark.parametrize("content", ["shape", "dtype", "dict"])
def test_a_tensor_file_unlike_its_dump_json_entry_is_one_line(tensor_dump, tmp_path, capsys, content):
    import torch

    train, rollout = _copy(tensor_dump, tmp_path)
    pt = _pt(rollout)
    original = torch.load(pt, weights_only=True)
    torch.save({"shape": original[..., :3], "dtype": original.to(torch.float16),
                "dict": {"t": original}}[content], pt)  # fmt: skip
    code, err = _analyze(capsys, train, rollout, tmp_path / "out")
    expected = {"shape": "of shape", "dtype": "torch.float16", "dict": "holds a dict, not a tensor"}[content]
    _one_line(code, err, pt, expected)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([1, 2], "the dump is a JSON list, not an object of module calls"),
        ({"task": "tensor", "data": [1]}, "its 'data' is a JSON list"),
        ({"task": "tensor", "data": "x"}, "its 'data' is a JSON text"),
    ],
)
def test_a_dump_json_of_the_wrong_shape_is_one_line(tensor_dump, tmp_path, capsys, doc, message):
    train, rollout = _copy(tensor_dump, tmp_path)
    (train / "dump.json").write_text(json.dumps(doc))
    code, err = _analyze(capsys, train, rollout, tmp_path / "out")
    _one_line(code, err, train / "dump.json", message)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("shape", "abc", 'shape "abc" is not a list of sizes >= 0'),
        ("shape", [4, -1], "shape [4, -1] is not a list of sizes"),
        ("data_name", "../../../escape.pt", "is not a file name in dump_tensor_data/"),
        ("data_name", 7, "data_name 7 is not a file name"),
    ],
)
def test_a_tensor_leaf_described_impossibly_names_its_key(tensor_dump, tmp_path, capsys, field, value, message):
    train, rollout = _copy(tensor_dump, tmp_path)
    doc = json.loads((rollout / "dump.json").read_text())
    doc["data"][MLP]["output"][0][field] = value
    (rollout / "dump.json").write_text(json.dumps(doc))
    code, err = _analyze(capsys, train, rollout, tmp_path / "out")
    _one_line(code, err, rollout / "dump.json", f"data.{MLP}.output.0", message)


def test_out_that_is_a_file_is_one_line_before_any_work(tensor_dump, tmp_path, capsys):
    train, rollout = _copy(tensor_dump, tmp_path)
    out = tmp_path / "out.txt"
    out.write_text("not a folder")
    code, err = _analyze(capsys, train, rollout, out)
    _one_line(code, err, out, "is not a directory")
    code, err = _analyze(capsys, train, rollout, out / "below")
    _one_line(code, err, out, "is not a folder")


def test_a_construct_json_of_the_wrong_shape_only_loses_the_tree(tensor_dump, tmp_path, capsys):
    train, rollout = _copy(tensor_dump, tmp_path)
    (train / "construct.json").write_text("[1, 2, 3]")
    code, err = _analyze(capsys, train, rollout, tmp_path / "out")
    assert code == 0, err


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc: a folder nobody can write into")
def test_an_out_folder_that_cannot_be_written_is_one_line(tensor_dump, tmp_path, capsys):
    train, rollout = _copy(tensor_dump, tmp_path)
    out = Path("/proc/self/rl-autotest-out")  # a folder even root cannot create
    code, err = _analyze(capsys, train, rollout, out)
    _one_line(code, err, out, "cannot write the analysis", "pass a writable --out folder")
