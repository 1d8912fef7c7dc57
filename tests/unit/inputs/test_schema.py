"""The shared YAML reader: one line per mistake, naming file and dotted key, with what to do."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.schema import Section, expand_env, load_section, load_yaml, show


def section(tmp_path: Path, text: str, **keys: tuple[str, ...]) -> Section:
    path = tmp_path / "f.yaml"
    path.write_text(text, encoding="utf-8")
    return load_section(path, what="a thing", doc="docs/thing.md", **keys)


def message(tmp_path: Path, call) -> str:
    with pytest.raises(UsageError) as info:
        call()
    text = str(info.value)
    assert "\n" not in text
    return text.replace(f"{tmp_path / 'f.yaml'}", "f.yaml")


def test_file_level_errors(tmp_path: Path) -> None:
    assert message(tmp_path, lambda: section(tmp_path, "")) == (
        "f.yaml: (file): the file is empty; write a thing (see docs/thing.md)")
    assert message(tmp_path, lambda: section(tmp_path, "a: 1\nb: {c: 1, c: 2}\n")) == (
        "f.yaml:2: duplicate key 'c'; keep one")
    assert message(tmp_path, lambda: section(tmp_path, "a: [1\n")) == (
        "f.yaml:2: expected ',' or ']', but got '<stream end>'; fix the YAML syntax")
    assert message(tmp_path, lambda: section(tmp_path, "- 1\n")) == (
        "f.yaml: (file): [1] is not a mapping; write key: value lines")
    with pytest.raises(UsageError, match=r"missing\.yaml: cannot read \(.*\); check the file$"):
        load_yaml(tmp_path / "missing.yaml")


def test_keys_get_a_did_you_mean_and_the_doc(tmp_path: Path) -> None:
    keys = {"required": ("steps",), "optional": ("exact", "wall_time_s")}
    assert message(tmp_path, lambda: section(tmp_path, "step: 3\n", **keys)) == (
        "f.yaml: step: unknown key; did you mean 'steps'?")
    assert message(tmp_path, lambda: section(tmp_path, "zzz: 3\n", **keys)) == (
        "f.yaml: zzz: unknown key; allowed: steps, exact, wall_time_s")
    assert message(tmp_path, lambda: section(tmp_path, "exact: true\n", **keys)) == (
        "f.yaml: steps: required key is missing; add it (see docs/thing.md)")
    top = section(tmp_path, "a: {b: {c: x}}\n")
    inner = top.section("a").section("b")
    assert (inner.key("c"), inner.doc, top.section("z", optional=True)) == ("a.b.c", "docs/thing.md", None)
    assert message(tmp_path, lambda: inner.integer("c", minimum=0, fix="write a count")) == (
        "f.yaml: a.b.c: 'x' is not a whole number; write a count")


def test_typed_reads_and_defaults(tmp_path: Path) -> None:
    sec = section(tmp_path, "t: hi\nn: 2\nf: 0.5\nb: false\nc: gate\nl: [a, b]\ni: [0, 3]\n"
                            "m: {K: 1}\nnull_t: null\n")
    assert (sec.text("t"), sec.text("absent", ""), sec.text("null_t", nullable=True)) == ("hi", "", None)
    assert (sec.integer("n", minimum=1), sec.number("f", positive=True), sec.number("x", default=None)) == (
        2, 0.5, None)
    assert (sec.boolean("b"), sec.choice("c", ("gate", "reference")), sec.choice("s", ("a",), default="a")) == (
        False, "gate", "a")
    assert (sec.str_list("l"), sec.int_list("i"), sec.str_map("m", env_values=True)) == (
        ("a", "b"), (0, 3), {"K": "1"})
    cases = [
        (lambda: sec.integer("n", minimum=3, fix="fix n"), "n: 2 is below 3; fix n"),
        (lambda: sec.number("f", minimum=1, fix="fix f"), "f: 0.5 is below 1; fix f"),
        (lambda: sec.number("t"), "t: 'hi' is not a number; write a number"),
        (lambda: sec.text("n"), "n: 2 is not a non-empty text; write a quoted string"),
        (lambda: sec.boolean("t"), "t: 'hi' is not true or false; write true or false"),
        (lambda: sec.choice("t", ("a", "b")), "t: 'hi' is not one of a, b; write one of a, b (quote it)"),
        (lambda: sec.int_list("l"), "l[0]: 'a' is not a whole number >= 0; write e.g. 0"),
        (lambda: sec.str_map("m"), "m.K: 1 is not a text; write a non-empty text"),
        (lambda: sec.section("t"), "t: 'hi' is not a mapping; write key: value lines"),
    ]
    for call, expected in cases:
        assert message(tmp_path, call) == f"f.yaml: {expected}"


def test_show_keeps_lines_short() -> None:
    assert (show(None), show(True), show("x"), show(list(range(30)))) == ("null", "true", "'x'", "a list")


def test_expand_env() -> None:
    env = {"ROOT": "/share/with space", "EMPTY": ""}
    assert expand_env("${ROOT}/m ${X:-d} $HOME", "f: k", env) == "/share/with space/m ${X:-d} $HOME"
    assert expand_env("${ROOT}", "f: k", env, quote=shlex.quote) == "'/share/with space'"
    for name in ("UNSET", "EMPTY"):  # an empty value would turn ${EMPTY}/x into /x
        with pytest.raises(UsageError) as info:
            expand_env(f"${{{name}}}/x", "f.yaml: golden.tracker", env, when="before the run")
        assert str(info.value) == f"f.yaml: golden.tracker: ${{{name}}} is not set; export {name} before the run"


def test_expand_env_reads_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RL_T_SCHEMA_ROOT", "/r")
    assert expand_env("${RL_T_SCHEMA_ROOT}/x", "f: k") == "/r/x"


def test_the_libyaml_fast_path_reads_every_committed_file_as_pyyaml_does():
    import yaml

    from autotest.inputs import schema, yaml_load
    from tests.helpers import ROOT

    files = sorted((ROOT / "baselines").glob("*.yaml")) + sorted((ROOT / "autotest" / "cases").glob("*.yaml"))
    assert files and yaml_load._UniqueKeyCLoader is not None  # libyaml is there: the fast path is what runs
    for path in files:
        assert schema.load_yaml(path) == yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader), path
