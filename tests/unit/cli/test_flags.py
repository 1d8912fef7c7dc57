"""A flag declared once reaches every run a command makes: ``run``'s run, each A/B side, each calibration run
(plain and paired), each bisect probe and the nightly's. The runner is replaced by one that records the request
it was given and stops; the commands run for real up to it (case, baseline, folders, preflight)."""

from __future__ import annotations

from pathlib import Path

import pytest

import autotest.ab.aa
import autotest.ab.interleave
import autotest.bisect.nightly
import autotest.bisect.session
import autotest.calibration.runs
import autotest.inputs.run_flags as run_flags
import autotest.pipeline
from autotest.bisect.probe import probe
from autotest.bisect.session import _run_options
from autotest.cli import build_parser, main
from autotest.inputs.case import load_case
from autotest.inputs.run_flags import AB, BISECT, CALIBRATE, NIGHTLY, NUMBER, RUN, Option
from autotest.pipeline.options import RunOptions
from tests.unit.cli.test_bad_flags import _one_error_line

#: a flag no command has: declared here only, for the test
TEST_OPTION = Option("--test-wait-s", NUMBER, "test only", (RUN, AB, CALIBRATE, BISECT, NIGHTLY),
                     field="launch.gpu_wait_s", minimum=0, maximum=1e6, range_text="a test number")
RAY = ["--ray-jobs", "http://127.0.0.1:1", "--ray-resource", "probe=2"]


class Stopped(Exception):
    """Raised by the recording runner: the request is taken, nothing launches."""


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> list[RunOptions]:
    taken: list[RunOptions] = []

    def record(case, options: RunOptions):
        taken.append(options)
        raise Stopped

    monkeypatch.setattr(run_flags, "OPTIONS", (*run_flags.OPTIONS, TEST_OPTION))
    for module in (autotest.pipeline, autotest.ab.interleave, autotest.ab.aa, autotest.calibration.runs):
        monkeypatch.setattr(module, "run_case", record)
    return taken


def _reached(request: RunOptions, history: bool = True) -> None:
    assert request.launch.gpu_wait_s == 123.0  # the test-only flag
    assert request.launch.ray_address == "http://127.0.0.1:1" and request.launch.ray_resources == {"probe": 2.0}
    assert (request.publish.after_results is not None) is history


def test_a_flag_declared_once_is_on_every_command_it_names(requests) -> None:
    for command in ("run", "ab", "calibrate", "bisect", "nightly-bisect"):
        assert "--test-wait-s" in build_parser(command)._subparsers._group_actions[0].choices[command].format_help()


def test_run_gets_the_base_request(requests, tmp_path: Path) -> None:
    with pytest.raises(Stopped):
        main(["run", "tiny-grpo", "--yes", "--results-dir", str(tmp_path), "--test-wait-s=123", *RAY])
    (request,) = requests
    _reached(request)
    assert request.judge.purpose == "gate"


def test_each_ab_side_derives_from_the_base_request(requests, tmp_path: Path) -> None:
    with pytest.raises(Stopped):
        main(["ab", "tiny-grpo", "--base=clean", "--head=fault:lr_scale:10", "--seeds=11", "--env=A_B=1",
              "--results-dir", str(tmp_path), "--test-wait-s=123", *RAY])
    (side,) = requests
    _reached(side)
    assert (side.judge.purpose, side.judge.replicates, side.launch.seed) == ("ab", 1, 11)
    assert side.launch.env == {"A_B": "1"} and side.launch.results_dir is not None


def test_each_calibration_run_derives_from_the_base_request(requests, tmp_path: Path) -> None:
    with pytest.raises(Stopped):
        main(["calibrate", "tiny-grpo", "--runs=2", "--jobs=1", "--allow-dirty", "--results-dir", str(tmp_path),
              "--baselines-dir", str(tmp_path), "--test-wait-s=123", *RAY])
    request = requests[0]
    _reached(request)
    assert (request.judge.purpose, request.judge.replicates) == ("calibration", 1)


def test_each_paired_calibration_run_derives_from_the_base_request(requests, tmp_path: Path) -> None:
    with pytest.raises(Stopped):
        main(["calibrate", "tiny-grpo", "--paired", "--runs=2", "--results-dir", str(tmp_path),
              "--test-wait-s=123", *RAY])
    (request,) = requests
    _reached(request)
    assert request.judge.purpose == "ab" and request.launch.results_dir.name.startswith("a-seed")


def _probe_request(options, tmp_path: Path) -> RunOptions:
    taken: list[RunOptions] = []

    def record(case, request: RunOptions):
        taken.append(request)
        raise Stopped

    with pytest.raises(Stopped):
        probe(load_case("tiny-grpo"), "abc123", "https://example.invalid/fw.git", tmp_path, _run_options(options),
              run=record)
    return taken[0]


def test_each_bisect_probe_derives_from_the_base_request(requests, monkeypatch, tmp_path: Path) -> None:
    given = []
    monkeypatch.setattr(autotest.bisect.session, "bisect", lambda case, options: given.append(options) or _stop())
    with pytest.raises(Stopped):
        main(["bisect", "tiny-grpo", "--good=a", "--bad=b", "--seed=5", "--test-wait-s=123", *RAY])
    request = _probe_request(given[0], tmp_path)
    _reached(request, history=False)  # a probe is never recorded as a trusted run
    assert (request.judge.purpose, request.launch.framework_ref, request.launch.seed) == ("bisect", "abc123", 5)


def test_each_nightly_probe_derives_from_the_base_request(requests, monkeypatch, tmp_path: Path) -> None:
    given = []
    monkeypatch.setattr(autotest.bisect.nightly, "run_nightly_bisect",
                        lambda *args, options, **kw: given.append(options) or _stop())
    with pytest.raises(Stopped):
        main(["nightly-bisect", "--results-dir", str(tmp_path), "--test-wait-s=123"])
    request = _probe_request(given[0], tmp_path)
    assert request.launch.gpu_wait_s == 123.0 and request.judge.purpose == "bisect"


def test_bisect_ray_tasks_place_the_probes_and_jobs_launch_them(monkeypatch, capsys) -> None:
    given = []
    monkeypatch.setattr(autotest.bisect.session, "bisect", lambda case, options: given.append(options) or _stop())
    with pytest.raises(Stopped):
        main(["bisect", "tiny-grpo", "--good=a", "--bad=b", "--ray-tasks=local", "--ray-resource=probe=1"])
    assert given[0].ray.address == "local" and given[0].ray.resources == {"probe": 1.0}
    assert given[0].run_options.launch.ray_address is None
    assert main(["bisect", "tiny-grpo", "--good=a", "--bad=b", "--ray-tasks=local", "--ray-jobs=local"]) == 2
    assert _one_error_line(capsys).startswith("rl-autotest: error: --ray-jobs and --ray-tasks: give one")


@pytest.mark.parametrize("argv, dest, new", [
    (["run", "tiny-grpo", "--force"], "force_replicates", "--force-replicates"),
    (["run", "tiny-grpo", "--adaptive", "3"], "adaptive_replicates", "--adaptive-replicates"),
    (["run", "tiny-grpo", "--ray-address", "http://h:8265"], "ray_jobs", "--ray-jobs"),
    (["calibrate", "tiny-grpo", "--ray-address", "local"], "ray_tasks", "--ray-tasks"),
    (["bisect", "tiny-grpo", "--good=a", "--bad=b", "--ray-address", "local"], "ray_tasks", "--ray-tasks"),
    (["calibrate", "tiny-grpo", "--out", "."], "baselines_dir", "--baselines-dir"),
])
def test_an_old_spelling_still_works_and_names_the_new_one(argv, dest, new, capsys) -> None:
    args = build_parser(argv[0]).parse_args(argv)
    assert getattr(args, dest) not in (None, False)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"rl-autotest: {argv[2] if argv[0] != 'bisect' else argv[4]} is now {new} (the old spelling " \
                   "goes in the next release)"


def _stop():
    raise Stopped
