"""One record per format: every list of formats derives from the registry, the docs' table too; third-party
readers come in through the ``rl_autotest.readers`` entry point (a real distribution on ``sys.path``)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from autotest.calibration.init_cli import LOG_FORMATS
from autotest.errors import UsageError
from autotest.inputs.case import TRACKER_FORMATS
from autotest.inputs.log_search import find_logs, kinds_of_format, looked_for
from autotest.inputs.tracker_layout import COPY_NAMES
from autotest.readers import registry
from autotest.readers.reading import read_trace
from tests.helpers import DATA, run_cli

DOCS = Path(__file__).resolve().parents[3] / "docs" / "readers.md"


def test_every_list_of_formats_is_the_registrys() -> None:
    names = tuple(f.name for f in registry.BUILTIN)
    assert TRACKER_FORMATS == LOG_FORMATS == names
    assert set(COPY_NAMES) == {n for f in registry.BUILTIN for n in f.copy_names}
    assert looked_for() == tuple(layout.looked_for for layout in registry.layouts())
    for record in registry.BUILTIN:
        assert kinds_of_format(record.name) == record.layouts_kinds
        assert callable(record.load_reader())  # every lazy reader resolves


def test_the_docs_table_is_the_registrys() -> None:
    text = DOCS.read_text(encoding="utf-8")
    block = re.search(r"<!-- formats: .*? -->\n(.*?)\n<!-- /formats -->", text, re.S)
    assert block is not None, "docs/readers.md lost its generated formats table"
    assert block.group(1).strip() == registry.markdown_table().strip(), \
        "docs/readers.md's formats table differs from the registry; paste registry.markdown_table() there"


def test_an_unknown_format_or_a_missing_option_is_one_line() -> None:
    with pytest.raises(UsageError, match=r"^unknown metric-log format 'comet'; choose one of xtuner, verl, "):
        registry.get("comet")
    with pytest.raises(UsageError, match=r"^metric-log format 'console' needs an option: the line pattern"):
        registry.get("console")
    with pytest.raises(UsageError, match=r"^metric-log format 'verl' takes no option \(got 'verl:x'\)"):
        registry.get("verl:x")


# -- plugins: a distribution on sys.path whose entry_points.txt names a ReaderFormat ---------------------------

PLUGIN = '''
from pathlib import Path
from types import MappingProxyType

from autotest.judge.trace import Trace
from autotest.readers.registry import Layout, ReaderFormat


def read(path, keep=None):
    """'step value' lines: the metric 'score'."""
    series = {}
    for line in Path(path).read_text().splitlines():
        step, value = line.split()
        series[int(step)] = float(value)
    return Trace(source=str(path), series=MappingProxyType({"score": MappingProxyType(series)}),
                 train_steps=tuple(sorted(series)), eval_steps=(), format="steps-file")


FORMAT = ReaderFormat("steps-file", "two columns: step and score", "fake_reader_plugin:read",
                      (Layout("steps file", ("*.steps",), "each", "steps files (*.steps)"),), ("score.steps",),
                      names=("*.steps",))
NOT_A_FORMAT = 42
XTUNER_AGAIN = ReaderFormat("xtuner", "a second xtuner", "fake_reader_plugin:read", (), ("x.jsonl",))
'''


def _distribution(site: Path, entry: str, module: str = PLUGIN) -> None:
    (site / "fake_reader_plugin.py").write_text(module, encoding="utf-8")
    info = site / "fake_reader_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-reader-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{registry.ENTRY_POINT_GROUP}]\n{entry}\n")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A folder on sys.path for one fake distribution; the plugins are loaded afresh with it, and again after."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setattr(registry, "_plugins", None)
    monkeypatch.delitem(__import__("sys").modules, "fake_reader_plugin", raising=False)
    yield folder


def test_a_plugins_format_is_read_found_and_accepted_everywhere(site: Path, tmp_path: Path) -> None:
    _distribution(site, "steps-file = fake_reader_plugin:FORMAT")
    assert registry.format_names()[-1] == "steps-file" and registry.load_plugins() is registry.load_plugins()
    log = tmp_path / "run" / "out" / "score.steps"
    log.parent.mkdir(parents=True)
    log.write_text("1 0.5\n2 0.75\n")
    assert read_trace(log).get("score") == {1: 0.5, 2: 0.75}  # told by its name
    assert [f.kind for f in find_logs(tmp_path / "run")] == ["steps file"]
    assert read_trace(tmp_path / "run", "steps-file").format == "steps-file"  # found in a work dir


@pytest.mark.parametrize("entry, why", [
    ("broken = fake_reader_plugin_missing:FORMAT", r"cannot be loaded: ModuleNotFoundError: No module named "
                                                   r"'fake_reader_plugin_missing'; fix or uninstall the plugin"),
    ("number = fake_reader_plugin:NOT_A_FORMAT", r"names a int, not an autotest.readers.registry.ReaderFormat"),
    ("other-name = fake_reader_plugin:FORMAT", r"names format 'steps-file'; call the entry point after its format"),
    ("xtuner = fake_reader_plugin:XTUNER_AGAIN", r": format name 'xtuner' is already registered; rename it$"),
])
def test_a_broken_plugin_is_one_line_naming_it(site: Path, entry: str, why: str | None) -> None:
    _distribution(site, entry)
    name, value = (p.strip() for p in entry.split("="))
    with pytest.raises(UsageError) as info:
        registry.formats()
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"reader plugin {name!r} (entry point rl_autotest.readers = {value!r}, from "
                              "fake-reader-plugin)")
    if why is not None:
        assert re.search(why, message), message


def test_a_plugin_that_raises_on_import_is_one_cli_line(site: Path, capsys: pytest.CaptureFixture) -> None:
    _distribution(site, "bad = fake_reader_plugin:FORMAT", module="raise RuntimeError('boom')\n")
    code = run_cli("compare", "--baseline", str(DATA / "baselines" / "scripted.yaml"), "--current",
                   str(DATA / "baselines" / "scripted.yaml"), "--format", "bad")
    out = capsys.readouterr().out
    assert code == 2 and out.count("\n") == 1, out
    assert out.startswith("rl-autotest: error: reader plugin 'bad' (entry point rl_autotest.readers = "
                          "'fake_reader_plugin:FORMAT', from fake-reader-plugin) cannot be loaded: RuntimeError: boom")


def test_a_plugin_package_is_documented_as_one_module_and_one_entry_point() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert '[project.entry-points."rl_autotest.readers"]' in text
    assert textwrap.dedent(registry.__doc__ or "").count("rl_autotest.readers") >= 1


def test_readers_are_pure_logic() -> None:
    """No reader imports pytest or starts a process (the W&B service is the test's to start, never a reader's)."""
    import ast

    import autotest.readers

    banned = ("pytest", "subprocess", "multiprocessing", "_pytest")
    found = []
    for path in sorted(Path(autotest.readers.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.name}:{node.lineno}: {n}" for n in names if n.split(".")[0] in banned]
    assert not found, found
