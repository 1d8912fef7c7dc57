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


# -- a plugin that fails later: at import with SystemExit, in its reader or sniffer, or with the wrong return ----

FAILING_PLUGIN = '''
from autotest.readers.registry import Layout, ReaderFormat


class Fatal(BaseException):
    pass


def raises(path, keep=None):
    raise KeyError("score")


def exits(path, keep=None):
    raise SystemExit(0)


def fatal(path, keep=None):
    raise Fatal("multi\\\\nline")


def wrong_type(path, keep=None):
    return {"score": {1: 0.5}}


def sniff_raises(row, line):
    raise RuntimeError("sniffing")


def sniff_number(row, line):
    return 7


def record(name, reader, sniff=None):
    return ReaderFormat(name, "a broken reader", f"fake_reader_plugin:{reader}", (), (f"{name}.log",),
                        sniff=f"fake_reader_plugin:{sniff}" if sniff else None)


RAISES, EXITS, FATAL, WRONG = (record(n, r) for n, r in (("raises", "raises"), ("exits", "exits"),
                                                          ("fatal", "fatal"), ("wrong", "wrong_type")))
SNIFF_RAISES, SNIFF_NUMBER = record("sniff-raises", "raises", "sniff_raises"), record("sniff-number", "raises",
                                                                                       "sniff_number")
ELSEWHERE = ReaderFormat("elsewhere", "reader in a module that exits", "fake_reader_exits:read", (), ("e.log",))
'''


def _where(name: str, value: str) -> str:
    return f"reader plugin {name!r} (entry point rl_autotest.readers = {value!r}, from fake-reader-plugin)"


@pytest.mark.parametrize("module, exception", [("raise SystemExit(0)\n", "SystemExit: 0"),
                                               ("class E(BaseException):\n    pass\nraise E()\n", "E"),
                                               ("import sys\nsys.exit('bye')\n", "SystemExit: bye")])
def test_a_plugin_that_exits_on_import_is_one_line_never_a_silent_pass(site: Path, capsys: pytest.CaptureFixture,
                                                                      module: str, exception: str) -> None:
    _distribution(site, "bad = fake_reader_plugin:FORMAT", module=module)
    code = run_cli("compare", "--baseline", str(DATA / "baselines" / "scripted.yaml"), "--current",
                   str(DATA / "baselines" / "scripted.yaml"))
    assert (code, capsys.readouterr().out) == (2, f"rl-autotest: error: {_where('bad', 'fake_reader_plugin:FORMAT')} "
                                                  f"cannot be loaded: {exception}; fix or uninstall the plugin\n")


@pytest.mark.parametrize("name, record, problem", [
    ("raises", "RAISES", "its reader 'fake_reader_plugin:raises' raised KeyError: 'score'"),
    ("exits", "EXITS", "its reader 'fake_reader_plugin:exits' raised SystemExit: 0"),
    ("fatal", "FATAL", r"its reader 'fake_reader_plugin:fatal' raised Fatal: multi\nline"),
    ("wrong", "WRONG", None),
    ("elsewhere", "ELSEWHERE", "its 'fake_reader_exits:read' cannot be loaded (SystemExit: 3)"),
])
def test_a_plugin_reader_that_fails_or_returns_no_trace_is_one_line(site: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture, name: str,
                                                                    record: str, problem: str | None) -> None:
    _distribution(site, f"{name} = fake_reader_plugin:{record}", module=FAILING_PLUGIN)
    (site / "fake_reader_exits.py").write_text("raise SystemExit(3)\n")
    log = tmp_path / "run.log"
    log.write_text("1 0.5\n")
    code = run_cli("compare", "--baseline", str(DATA / "baselines" / "scripted.yaml"), "--current", str(log),
                   "--format", name, "--no-history")
    out = capsys.readouterr().out
    where = _where(name, f"fake_reader_plugin:{record}")
    if problem is None:
        problem = f"returned a dict for {log}, not an autotest.judge.trace.Trace"
        assert out == f"rl-autotest: error: {where} {problem}; fix or uninstall the plugin\n"
    else:
        assert out == f"rl-autotest: error: {where}: {problem}; fix or uninstall the plugin\n"
    assert code == 2


@pytest.mark.parametrize("name, record, problem", [
    ("sniff-raises", "SNIFF_RAISES", ": its sniffer 'fake_reader_plugin:sniff_raises' raised RuntimeError: sniffing"),
    ("sniff-number", "SNIFF_NUMBER", ": its sniffer 'fake_reader_plugin:sniff_number' returned a int, not a format "
                                     "name or None"),
])
def test_a_plugin_sniffer_that_fails_is_one_line(site: Path, tmp_path: Path, name: str, record: str,
                                                 problem: str) -> None:
    _distribution(site, f"{name} = fake_reader_plugin:{record}", module=FAILING_PLUGIN)
    log = tmp_path / "tracker.jsonl"
    log.write_text('{"step": 1, "score": 0.5}\n')
    with pytest.raises(UsageError) as info:
        read_trace(log)  # auto: every format's sniffer is asked
    assert str(info.value) == f"{_where(name, f'fake_reader_plugin:{record}')}{problem}; fix or uninstall the plugin"
