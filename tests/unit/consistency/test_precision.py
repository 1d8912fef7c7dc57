"""The dumps' dtypes in the root-cause judgement: a side computing in another dtype is named, with its modules."""

from __future__ import annotations

from autotest.consistency.dumps import ModuleEntry, TensorStat
from autotest.consistency.mapping import map_modules
from autotest.consistency.precision import PRECISION, dtype_differences, with_precision_finding
from autotest.consistency.value_compare import compare_group
from autotest.consistency.verdict import RootCauseReport

BASE = {"Max": 2.0, "Min": -2.0, "Mean": 0.1, "Norm": 8.0}


def _compares(train_output: str, train_weight: str = "torch.float32", paths: tuple[str, ...] = ("a.q_proj", "a.o")):
    """Modules whose train-side outputs are in ``train_output`` and parameters in ``train_weight``; the rollout is
    fp32 throughout and the statistics equal."""
    def entry(path: str, order: int, output: str, weight: str) -> ModuleEntry:
        tensors = (TensorStat("input_args.0", "input", "torch.float32", (4, 4), BASE, None),
                   TensorStat("output.0", "output", output, (4, 4), BASE, None),
                   TensorStat("parameters.weight", "parameter", weight, (4, 4), BASE, None))
        return ModuleEntry(f"Module.{path}.Linear.forward.0", path, "Linear", 0, order, None, tensors)

    train = {e.key: e for e in (entry(p, i, train_output, train_weight) for i, p in enumerate(paths))}
    rollout = {e.key: e for e in (entry(p, i, "torch.float32", "torch.float32") for i, p in enumerate(paths))}
    return [compare_group(g, train, rollout) for g in map_modules(train, rollout)]


def _report(bucket: str | None, divergence: str = "module") -> RootCauseReport:
    cause = None if bucket is None else {"bucket": bucket, "module": "trainer log-prob computation (after the model)",
                                          "pair": "recomputed vs trainer"}
    return RootCauseReport("root_cause_found" if cause else "no_divergence", "medium" if cause else None, cause, None,
                           (), (), None, (), ("check the trainer's gather",), (), (), (), {}, divergence=divergence)


def test_modules_in_another_dtype_on_the_actor_side_are_found_in_order() -> None:
    found = dtype_differences(_compares("torch.bfloat16"))
    assert [(d.module, d.train_dtype, d.rollout_dtype, d.train_parameter_dtype) for d in found] == [
        ("a.q_proj", "torch.bfloat16", "torch.float32", "torch.float32"),
        ("a.o", "torch.bfloat16", "torch.float32", "torch.float32")]
    assert dtype_differences(_compares("torch.float32")) == ()


def test_an_after_model_cause_under_different_dtypes_becomes_a_precision_cause() -> None:
    compares = _compares("torch.bfloat16")
    report = with_precision_finding(_report("after_model"), dtype_differences(compares), len(compares),
                                    {"actor": ["torch.bfloat16"], "rollout": ["off"]})
    cause = report.root_cause
    assert (report.verdict, report.divergence, cause["bucket"], cause["side"]) == (
        "root_cause_found", "precision", PRECISION, "actor")
    assert cause["dtypes"] == {"actor": "torch.bfloat16", "rollout": "torch.float32"}
    assert cause["modules"] == ["a.q_proj", "a.o"] and cause["autocast"] is True
    assert "computed under autocast" in cause["why"] and "hook saw autocast torch.bfloat16" in cause["why"]
    assert "autocast" in report.next_checks[0] and "gather" not in " ".join(report.next_checks)


def test_a_cast_model_is_told_from_autocast() -> None:
    compares = _compares("torch.bfloat16", train_weight="torch.bfloat16")
    cause = with_precision_finding(_report("after_model"), dtype_differences(compares), 2).root_cause
    assert cause["autocast"] is False and "the model is cast" in cause["why"]


def test_a_module_cause_where_dtypes_agree_is_kept() -> None:
    report = _report("parameter_sync_mismatch")
    kept = with_precision_finding(report, dtype_differences(_compares("torch.bfloat16", paths=("b",))), 1)
    assert kept.root_cause == report.root_cause and kept.divergence == "module"
    assert kept.evidence_chain[-1].startswith("dtypes, ")  # still said, as evidence
    assert with_precision_finding(report, (), 1) is report
