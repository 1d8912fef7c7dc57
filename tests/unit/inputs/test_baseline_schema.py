"""The baseline declaration drives the docs, the writer and the loader's key lists: the generated key table in
docs/baselines.md is current, a written baseline's sections follow the declared order, and a key the declaration
lacks is refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from autotest.inputs.baseline_docs import BEGIN, END, key_table, with_table
from autotest.inputs.baseline_schema import KEYS, allowed, in_order, keys_of
from autotest.inputs.baseline_writer import baseline_document
from tests.helpers import ROOT

DOCS = ROOT / "docs" / "baselines.md"


def test_the_docs_key_table_is_the_declaration() -> None:
    page = DOCS.read_text(encoding="utf-8")
    assert with_table(page) == page, ("docs/baselines.md's key table is stale: run "
                                      "`python -m autotest.inputs.baseline_docs docs/baselines.md`")
    for key in KEYS:
        assert f"| `{key.path}` |" in key_table()


def test_a_stale_table_is_caught() -> None:
    page = DOCS.read_text(encoding="utf-8")
    stale = page.replace("| `paired.pairs` |", "| `paired.pair_count` |")
    assert with_table(stale) != stale
    with pytest.raises(ValueError, match="lacks the markers"):
        with_table(page.replace(END, ""))
    assert page.count(BEGIN) == 1


@pytest.mark.parametrize("name", ["tiny-grpo", "tiny-mopd", "mopd-qwen3-vl-2b"])
def test_a_written_baseline_follows_the_declared_order(name: str) -> None:
    doc = baseline_document(load_baseline(ROOT / "baselines" / f"{name}.yaml"))
    sections = {"": doc, "golden": doc["golden"], "calibration": doc.get("calibration", {}),
                "paired": doc.get("paired", {}), **{"checks[]": c for c in doc["checks"][:1]}}
    for section, written in sections.items():
        declared = [k for k in allowed(section) if k in written]
        assert [k for k in written if k in declared] == declared, section
    assert list(in_order({"b": 1, "checks": 2, "golden": 3}, "")) == ["golden", "checks", "b"]


def test_the_section_keys_come_from_the_declaration(tmp_path: Path) -> None:
    assert keys_of("paired.windows[]") == (("metric", "steps", "noise", "level"), ("floor",))
    spec = yaml.safe_load((ROOT / "baselines" / "tiny-grpo.yaml").read_text())
    spec["calibration"]["run"] = 3
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    with pytest.raises(UsageError, match=r"calibration\.run: unknown key; did you mean 'runs'\?$"):
        load_baseline(path)
