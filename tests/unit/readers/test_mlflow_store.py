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
