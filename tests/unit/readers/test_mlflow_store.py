"""MLflow's file store, written by mlflow itself (its FileStore through MlflowClient), read without mlflow."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.log_search import find_logs
from autotest.readers.reading import read_trace
from tests.helpers import DATA, run_cli

mlflow = pytest.importorskip("mlflow")

SCRIPTED = DATA / "baselines" / "scripted.yaml"


def write_run(store: Path, series: dict[str, dict[int, float]], monkeypatch: pytest.MonkeyPatch) -> Path:
    """One run in a file store at ``store`` (mlflow 3 keeps the file store behind MLFLOW_ALLOW_FILE_STORE)."""
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=store.resolve().as_uri())
    experiment = client.get_experiment_by_name("ci") or client.get_experiment(client.create_experiment("ci"))
    run = client.create_run(experiment.experiment_id)
    for metric, points in series.items():
        for step, value in points.items():
            client.log_metric(run.info.run_id, metric, value, step=step)
    client.set_terminated(run.info.run_id)
    return store / experiment.experiment_id / run.info.run_id


GOLDEN = {"response/rewards/mean": {s: 0.1 + 0.02 * s for s in range(1, 11)},
          "mismatch/mismatch_k3_kl": {s: 1e-14 for s in range(1, 11)}, "eval/accuracy": {0: 0.5, 10: 0.9}}


def test_a_run_folder_and_the_store_read_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = write_run(tmp_path / "mlruns", GOLDEN, monkeypatch)
    assert (run / "metrics" / "response" / "rewards" / "mean").is_file()  # a key's "/" is a folder
    trace = read_trace(run, "mlflow")
    assert trace.get("response/rewards/mean") == pytest.approx(GOLDEN["response/rewards/mean"])
    assert trace.eval_steps == (0, 10) and trace.train_steps == tuple(range(1, 11))
    assert read_trace(tmp_path / "mlruns", "mlflow").series == trace.series
    assert [(f.path, f.kind) for f in find_logs(tmp_path)] == [(run, "MLflow run")]
    assert read_trace(tmp_path).format == "mlflow"  # a work dir holding mlruns/: found and told


def test_several_runs_read_the_newest_and_say_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_run(tmp_path / "mlruns", {"loss": {1: 1.0}}, monkeypatch)
    newest = write_run(tmp_path / "mlruns", {"loss": {1: 2.0}}, monkeypatch)
    trace = read_trace(tmp_path / "mlruns", "mlflow")
    assert trace.get("loss") == {1: 2.0} and trace.source == str(newest)
    assert any("2 MLflow runs; read the newest" in w for w in trace.warnings)


def test_a_damaged_metric_line_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = write_run(tmp_path / "mlruns", {"loss": {1: 1.0, 2: 0.5}}, monkeypatch)
    (run / "metrics" / "loss").write_text("1700000000000 1.0 1\n1700000000001 oops 2\n")
    with pytest.raises(UsageError, match=r"metrics/loss:2: not an MLflow metric line \(expected 'timestamp value "
                                         r"step', got '1700000000001 oops 2'\)"):
        read_trace(run, "mlflow")
    (run / "metrics" / "loss").write_text("1700000000000 1.0 100000000000000000000000000000\n")
    with pytest.raises(UsageError, match=r"metrics/loss:1: step 1e\+29 is beyond 9007199254740992"):
        read_trace(run, "mlflow")


def test_compare_reads_an_mlflow_run_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    run = write_run(tmp_path / "mlruns", GOLDEN, monkeypatch)
    out = tmp_path / "results"
    code = run_cli("compare", "--baseline", str(SCRIPTED), "--current", str(tmp_path), "--out", str(out),
                   "--no-plots", "--no-history")
    printed = capsys.readouterr().out
    assert code == 0 and "PASS" in printed, printed
    assert str(run) in (out / "results.json").read_text()


def test_a_metric_logged_for_a_dataset_is_read_and_two_datasets_in_one_metric_are_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    run = write_run(tmp_path / "mlruns", {"loss": {1: 1.0}}, monkeypatch)
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").resolve().as_uri())
    for step, value in ((1, 0.5), (2, 0.75)):  # mlflow writes these five fields: ... step name digest
        client.log_metric(run.name, "eval/accuracy", value, step=step, dataset_name="gsm8k", dataset_digest="1a2b")
    metric = run / "metrics" / "eval" / "accuracy"
    assert [len(line.split()) for line in metric.read_text().splitlines()] == [5, 5]
    assert read_trace(run, "mlflow").get("eval/accuracy") == {1: 0.5, 2: 0.75}
    client.log_metric(run.name, "eval/accuracy", 0.25, step=2, dataset_name="math", dataset_digest="9f9f")
    with pytest.raises(UsageError) as info:
        read_trace(run, "mlflow")
    assert str(info.value) == (
        f"{metric}:3: metric 'eval/accuracy' logged for dataset 'math' (digest 9f9f) here and for dataset 'gsm8k' "
        "(digest 1a2b) at line 1; one series per metric is read, so log each dataset's values under a key of its own")
    metric.write_text("1700000000000 0.5 1 gsm8k 1a2b\n1700000000001 0.75 2\n")
    with pytest.raises(UsageError, match=r"accuracy:2: metric 'eval/accuracy' logged for no dataset here and for "
                                         r"dataset 'gsm8k' \(digest 1a2b\) at line 1"):
        read_trace(run, "mlflow")


@pytest.mark.parametrize("text, message", [
    ("1700000000000 1.0 1\n1700000000001 0.5\n",
     r"loss:2: an MLflow metric line without a step \('1700000000001 0.5': 'timestamp value', as MLflow before 1.0 "
     r"wrote it\); series are aligned by step"),
    ("1700000000000 1.0 1 x\n", r"loss:1: not an MLflow metric line \(expected 'timestamp value step', got "
                                r"'1700000000000 1.0 1 x'\)"),
    ("1700000000000 1.0 1 a b c\n", r"loss:1: not an MLflow metric line"),
    ("1700000000000 1.0 1\n\x1b[2J 1.0 2\n", r"loss:2: not an MLflow metric line \(expected 'timestamp value step', "
                                             r"got '\\x1b\[2J 1.0 2'\)"),
])
def test_a_line_of_the_wrong_shape_is_one_line_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str,
                                                         message: str) -> None:
    run = write_run(tmp_path / "mlruns", {"loss": {1: 1.0}}, monkeypatch)
    (run / "metrics" / "loss").write_text(text)
    with pytest.raises(UsageError, match=message):
        read_trace(run, "mlflow")


def test_a_cut_short_last_line_is_dropped_with_a_warning_naming_it(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow appends each line whole with its newline: a last line without one was cut short, however it parses
    ('... 0.5 1' may be the start of step 12). It is dropped and said, as a JSONL tracker's half-written last line."""
    run = write_run(tmp_path / "mlruns", {"loss": {1: 1.0, 2: 0.5}}, monkeypatch)
    metric = run / "metrics" / "loss"
    metric.write_text("1700000000000 1.0 1\n1700000000001 0.5 2\n1700000000002 0.25 1")
    trace = read_trace(run, "mlflow")
    assert trace.get("loss") == {1: 1.0, 2: 0.5}
    assert trace.warnings == (f"{metric}:3: truncated final line dropped (the run was probably killed)",)
    metric.write_text("1700000000000 1.")
    with pytest.raises(UsageError, match=r"MLflow run has no metric values \(its only metric line was cut short\)"):
        read_trace(run, "mlflow")
