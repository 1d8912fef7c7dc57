"""Console logs read by a pattern: verl's and Megatron's lines as their loggers print them, a case's own regex,
and a bad pattern as one line; end to end through ``rl-autotest compare``."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.case import load_case
from autotest.readers.reading import read_trace, sniff_format
from tests.helpers import DATA, run_cli

SCRIPTED = DATA / "baselines" / "scripted.yaml"


def verl_console(values: dict[int, dict[str, float]]) -> str:
    """verl's console logger: concat_dict_to_str joins f"step:{step}" and f"{k}:{v:.3f}" with " - "."""
    return "".join(" - ".join([f"step:{step}"] + [f"{k}:{v:.3f}" for k, v in row.items()]) + "\n"
                   for step, row in values.items())


def megatron_console(losses: dict[int, float], total: int = 100) -> str:
    """Megatron-LM's training_log line (its fields in order, each ' key: value |')."""
    return "".join(
        f" [2024-05-01 10:00:{step:02d}] iteration {step:8d}/{total:8d} | consumed samples: {step * 64:12d} | "
        f"elapsed time per iteration (ms): 1234.5 | learning rate: 1.000000E-04 | global batch size:    64 | "
        f"lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: 0.512 | number of skipped iterations:   0 | "
        "number of nan iterations:   0 |\n" for step, loss in losses.items())


def test_verl_lines_between_other_output(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("(TaskRunner pid=1) loading model\n" + verl_console({1: {"actor/pg_loss": 0.123,
                   "critic/score/mean": 0.5}, 2: {"actor/pg_loss": 0.1, "val-core/acc": 0.7}}) + "Training done\n")
    trace = read_trace(log, "console:verl")
    assert trace.get("actor/pg_loss") == {1: 0.123, 2: 0.1} and trace.get("critic/score/mean") == {1: 0.5}
    assert trace.train_steps == (1, 2) and trace.eval_steps == (2,) and trace.format == "console:verl"


def test_megatron_lines(tmp_path: Path) -> None:
    log = tmp_path / "stdout.log"
    log.write_text("building GPT model ...\n" + megatron_console({10: 1.23456, 20: 1.1}))
    trace = read_trace(log, "console:megatron")
    assert trace.get("lm loss") == {10: 1.23456, 20: 1.1}
    assert trace.get("grad norm") == {10: 0.512, 20: 0.512} and trace.get("consumed samples")[20] == 1280
    assert sniff_format(log) == "xtuner"  # chatter first: not guessed (name the format)
    (tmp_path / "m.log").write_text(megatron_console({1: 1.0}))
    assert sniff_format(tmp_path / "m.log") == "console:megatron"


def test_a_regex_of_the_case(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("epoch 0 step 1 loss 0.5 reward 0.1\nstep 2 loss nan reward 0.2\nstep 3 loss oops reward 1\n")
    trace = read_trace(log, r"console:step (?P<step>\d+) loss (?P<loss>\S+) reward (?P<reward>\S+)")
    assert trace.get("reward") == {1: 0.1, 2: 0.2, 3: 1.0}
    assert trace.non_numeric["loss"] == ("a string", "line 3")  # text where a number belongs is named


def test_no_matching_line_is_one_line(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("hello\nworld\n")
    with pytest.raises(UsageError, match=r"run.log: no line of 2 matches the console pattern 'verl'; check "
                                         r"tracker.pattern \(write a preset"):
        read_trace(log, "console:verl")
    with pytest.raises(UsageError, match=r"^console format: 'step \(\?P<step>' is not a valid regular expression"):
        read_trace(log, "console:step (?P<step>")


def _case(tmp_path: Path, tracker: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(f"""name: c
description: d
markers: [grpo]
goal: g
minimal_scale: m
platform: {{gpus: 0, framework: null}}
launch: {{command: ["{{python}}", -c, "print(1)"], timeout_s: 10}}
tracker: {tracker}
expected: {{steps: 3}}
baseline: baselines/x.yaml
""")
    return path


def test_the_case_joins_its_pattern_onto_the_format(tmp_path: Path) -> None:
    assert load_case(_case(tmp_path, "{format: console, pattern: megatron}")).tracker.format == "console:megatron"
    assert load_case(_case(tmp_path, "{format: 'console:verl'}")).tracker.format == "console:verl"
    with pytest.raises(UsageError, match=r"c.yaml: tracker.pattern: format 'verl' takes no pattern; remove it"):
        load_case(_case(tmp_path, "{format: verl, pattern: verl}"))
    with pytest.raises(UsageError, match=r"c.yaml: tracker.pattern: '\(\?P<loss>\\S\+\)' has no named group "
                                         r"\(\?P<step>...\); write a preset \(verl, megatron\)"):
        load_case(_case(tmp_path, r"{format: console, pattern: '(?P<loss>\S+)'}"))


def test_compare_reads_a_verl_console_log_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rows = {s: {"response/rewards/mean": 0.1 + 0.02 * s, "mismatch/mismatch_k3_kl": 0.0} for s in range(1, 11)}
    rows[10]["eval/accuracy"] = 0.9
    log = tmp_path / "console.log"
    log.write_text(verl_console({0: {"eval/accuracy": 0.5}, **rows}))
    out = tmp_path / "results"
    code = run_cli("compare", "--baseline", str(SCRIPTED), "--current", str(log), "--format", "console:verl",
                   "--out", str(out), "--no-plots", "--no-history")
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "PASS" in printed


@pytest.mark.parametrize("pattern, line, shown", [
    (r"step (?P<step>\S*) loss (?P<loss>\S+)", "step  loss 0.5", "''"),
    (r"step (?P<step>\S+) loss (?P<loss>\S+)", "step 1.5 loss 0.5", "'1.5'"),
    (r"step (?P<step>\S+) loss (?P<loss>\S+)", "step -1 loss 0.5", "'-1'"),
    (r"step (?P<step>\S+) loss (?P<loss>\S+)", "step \x1b[2J loss 0.5", r"'\x1b[2J'"),
    (r"(?:step (?P<step>\d+) )?loss (?P<loss>\S+)", "loss 0.5", "nothing"),
])
def test_a_step_group_that_matched_no_whole_number_is_one_line(tmp_path: Path, pattern: str, line: str,
                                                               shown: str) -> None:
    log = tmp_path / "run.log"
    log.write_text(f"chatter\n{line}\n")
    with pytest.raises(UsageError) as info:
        read_trace(log, f"console:{pattern}")
    assert str(info.value) == (f"{log}:2: the console pattern's step group matched {shown}, not a whole number >= 0; "
                               r"make (?P<step>...) match only digits, e.g. (?P<step>\d+)")


def test_a_pattern_that_backtracks_without_end_is_bounded_and_named(tmp_path: Path, capsys, monkeypatch) -> None:
    """(a|aa)+ over 40 a's and a '!' tries about 2**28 ways on ``re`` (hours); the user's pattern runs on the
    ``regex`` engine with a time bound per line. The bound is shortened here so the test waits under a second; that
    the match cannot finish within it is the pattern's nature, not the machine's speed."""
    from autotest.readers import console_pattern

    monkeypatch.setattr(console_pattern, "MATCH_TIMEOUT_S", 0.2)
    pattern = r"step (?P<step>\d+) loss (?P<loss>(a|aa)+)$"
    log = tmp_path / "run.log"
    log.write_text("step 1 loss aa\nstep 2 loss " + "a" * 40 + "!\n")
    code = run_cli("compare", "--baseline", str(SCRIPTED), "--current", str(log), "--format", f"console:{pattern}",
                   "--no-plots", "--no-history")
    assert code == 2
    assert capsys.readouterr().out == (
        f"rl-autotest: error: {log}:2: the console pattern {pattern!r} did not finish on this line within 0.2 s (a "
        "nested quantifier such as (a+)+ backtracks without end); simplify tracker.pattern\n")
    # (a+)+$, the classic, needs no bound on this engine: the line is read (it does not match) at once
    log.write_text("step 1 loss " + "a" * 40 + "b\n")
    with pytest.raises(UsageError, match="no line of 1 matches the console pattern"):
        read_trace(log, r"console:step (?P<step>\d+) loss (?P<loss>(a+)+)$")
