"""Fuzz what ``consistency analyze`` and the consistency job read: MSProbe dump.json and construct.json,
the two correlation logs, a module-mapping file, and the accuracy run's consistency_request.json.

The seeds in data/msprobe are one forward of a real MSProbe L0 statistics dump of a tiny Qwen3's
layers.1.mlp on both sides (tests/integration/consistency/scenarios.py, scenario mlp_unsynced), with
their correlation lines. Property: a report, or one UsageError line naming the damaged file (or the dump
folder holding it); never a traceback.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, strategies as st

from autotest.consistency.analyze import analyze_dumps
from autotest.consistency.job import REQUEST_FILE, load_request, request_case
from tests.fuzz.strategies import corrupted, json_text, mutated, scaled, scratch, verdict_or_one_line

SEED = Path(__file__).with_name("data") / "msprobe"
UNIT = Path("dump/forward_0000/step2/proc1")
DUMP_JSON = (SEED / "actor" / UNIT / "dump.json").read_bytes()
CONSTRUCT_JSON = (SEED / "actor" / UNIT / "construct.json").read_bytes()
CORRELATION = (SEED / "rollout" / "correlation.jsonl").read_bytes()
MAPPING = {"rules": [{"train": r"^model\.layers\.(\d+)\.mlp\.(.*)$", "rollout": r"model.layers.\1.mlp.\2"}],
           "modules": {"model.layers.1.mlp": "model.layers.1.mlp"}}
REQUEST = {"schema_version": 2, "case": "scripted", "case_file": "tests/data/cases/scripted.yaml",
           "policy": "on-breach", "reason": "breach",
           "breaches": [{"metric": "mismatch/mismatch_k3_kl", "first_breach_step": 3, "worst_step": 5,
                         "threshold": 0.0001, "operator": "<=", "points": [{"step": 3, "current": 0.01,
                                                                             "baseline": 1e-14}]}],
           "results_dir": ".", "work_dir": "work", "tracker": "tracker.jsonl", "run_config": "run_config",
           "requested_at": "2026-12-01T16:04:14+00:00"}


def analyse(folder: Path, named: tuple[str, ...], *, logs: bool = False, mapping: Path | None = None) -> None:
    """Analyse the copy in ``folder`` as ``consistency analyze`` does (strict)."""
    sides = {side: folder / side for side in ("actor", "rollout")}
    kwargs: dict[str, Any] = {"strict": True, "mapping_file": mapping}
    if logs:
        kwargs |= {"train_correlation": sides["actor"] / "correlation.jsonl",
                   "rollout_correlation": sides["rollout"] / "correlation.jsonl"}
    verdict_or_one_line(lambda: analyze_dumps(sides["actor"] / "dump", sides["rollout"] / "dump", folder / "out",
                                              **kwargs), named)


def _copy(folder: Path) -> Path:
    for side in ("actor", "rollout"):
        shutil.copytree(SEED / side, folder / side)
    return folder


def test_the_seed_dumps_are_analysed() -> None:
    with scratch() as folder:
        report = analyze_dumps(_copy(folder) / "actor" / "dump", folder / "rollout" / "dump", folder / "out",
                               train_correlation=folder / "actor" / "correlation.jsonl",
                               rollout_correlation=folder / "rollout" / "correlation.jsonl", strict=True)
        assert report.root_cause and report.root_cause["module"].startswith("model.layers.1.mlp")


@given(data=st.data())
def test_dump_json_structured(data: st.DataObject) -> None:
    doc = json.loads(DUMP_JSON)
    for _ in range(data.draw(st.integers(1, 3))):
        doc = data.draw(mutated(doc))
    with scratch() as folder:
        (_copy(folder) / "actor" / UNIT / "dump.json").write_text(json_text(doc), encoding="utf-8",
                                                                    errors="surrogatepass")
        analyse(folder, ("dump.json", "proc1"))


@given(damaged=corrupted(DUMP_JSON))
def test_dump_json_bytes(damaged: bytes) -> None:
    with scratch() as folder:
        (_copy(folder) / "rollout" / UNIT / "dump.json").write_bytes(damaged)
        analyse(folder, ("dump.json", "proc1"))


@scaled(0.5)
@given(damaged=st.one_of(corrupted(CONSTRUCT_JSON), st.builds(json_text, st.from_type(object).filter(
    lambda v: isinstance(v, (list, dict, str, int, float, type(None))))).map(str.encode)))
def test_construct_json_only_refines_the_order(damaged: bytes) -> None:
    """construct.json (the module tree) is optional: damaged, the analysis still runs."""
    with scratch() as folder:
        (_copy(folder) / "actor" / UNIT / "construct.json").write_bytes(damaged)
        analyse(folder, ())  # no file to name: it must not fail at all


@st.composite
def correlation_lines(draw: st.DrawFn) -> bytes:
    lines: list[Any] = [json.loads(line) for line in CORRELATION.splitlines()]
    for _ in range(draw(st.integers(1, 3))):
        lines = draw(mutated(lines))
    lines = lines if isinstance(lines, list) else [lines]
    return "".join(json_text(line) + "\n" for line in lines).encode("utf-8", "surrogatepass")


@given(damaged=st.one_of(correlation_lines(), corrupted(CORRELATION)))
def test_correlation_log(damaged: bytes) -> None:
    with scratch() as folder:
        (_copy(folder) / "rollout" / "correlation.jsonl").write_bytes(damaged)
        analyse(folder, ("correlation.jsonl",), logs=True)


@scaled(0.5)
@given(data=st.data())
def test_mapping_file(data: st.DataObject) -> None:
    doc: Any = MAPPING
    for _ in range(data.draw(st.integers(1, 2))):
        doc = data.draw(mutated(doc))
    text = yaml.safe_dump(doc, allow_unicode=True).encode("utf-8", "surrogatepass")
    if data.draw(st.booleans()):
        text = data.draw(corrupted(text))
    with scratch() as folder:
        mapping = _copy(folder) / "mapping.yaml"
        mapping.write_bytes(text)
        analyse(folder, ("mapping.yaml",), mapping=mapping)


@given(data=st.data())
def test_consistency_request(data: st.DataObject) -> None:
    doc: Any = REQUEST
    for _ in range(data.draw(st.integers(1, 3))):
        doc = data.draw(mutated(doc))
    raw = json_text(doc).encode("utf-8", "surrogatepass")
    if data.draw(st.booleans()):
        raw = data.draw(corrupted(raw))
    with scratch() as folder:
        (folder / REQUEST_FILE).write_bytes(raw)
        request = verdict_or_one_line(lambda: load_request(folder), REQUEST_FILE)
        if request is not None:
            verdict_or_one_line(lambda: request_case(request), REQUEST_FILE)


def logprob_seed() -> list[dict[str, Any]]:
    """Two samples as each of the three kinds saw them (logprob_records.py's format)."""
    rows = []
    for kind, shift in (("recorded", 0.0), ("recomputed", 1e-6), ("trainer", 2e-6)):
        for sample in (0, 1):
            rows.append({"kind": kind, "step": 2, "sample": sample, "request_id": f"s2-p0-r{sample}",
                         "positions": [5, 6, 7], "token_ids": [9, 4, 1], "logprobs": [-0.41 - shift, -1.2, -0.03],
                         "dtype": "fp32"})
    return rows


@given(data=st.data())
def test_logprob_records(data: st.DataObject) -> None:
    from autotest.consistency.logprob_compare import load_comparison

    rows: Any = logprob_seed()
    for _ in range(data.draw(st.integers(1, 3))):
        rows = data.draw(mutated(rows))
    lines = rows if isinstance(rows, list) else [rows]
    raw = "".join(json_text(r) + "\n" for r in lines).encode("utf-8", "surrogatepass")
    if data.draw(st.booleans()):
        raw = data.draw(corrupted(raw))
    with scratch() as folder:
        path = folder / "logprobs.jsonl"
        path.write_bytes(raw)
        verdict_or_one_line(lambda: load_comparison([path], strict=True), path)
