"""Every declared run flag, fuzzed from its declaration (autotest/inputs/run_flags.py): for each option and each
command that takes it, bad values of its kind and bounds (below, above, empty, the wrong type, unicode digits,
control characters, a file where a folder goes) are one line naming the flag and exit 2, before anything runs:
every runner is replaced by one that fails the test. A flag declared later is fuzzed the day it is declared."""

from __future__ import annotations

import io
import string
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autotest.ab.aa
import autotest.ab.interleave
import autotest.bisect.nightly
import autotest.bisect.session
import autotest.calibration.promote
import autotest.calibration.runs
import autotest.judge.verdict
import autotest.pipeline
from autotest.cli import main
from autotest.inputs.run_flags import COUNT, FLAG, FOLDER, NUMBER, OPTIONS, PAIRS, SEEDS, TEXT, Option

#: what each command needs besides the fuzzed flag
REQUIRED = {"run": ["tiny-grpo", "--yes"], "ab": ["tiny-grpo", "--base=clean", "--head=clean"],
            "calibrate": ["tiny-grpo"], "bisect": ["tiny-grpo", "--good=a", "--bad=b"], "nightly-bisect": [],
            "power": ["tiny-grpo"], "compare": ["--baseline=b.yaml", "--current=t.jsonl", "--out=."],
            "baseline promote": ["tiny-grpo"]}
RUNNERS = [(autotest.pipeline, "run_case"), (autotest.ab.interleave, "run_ab"), (autotest.ab.aa, "calibrate_paired"),
           (autotest.calibration.runs, "calibrate_case"), (autotest.bisect.session, "bisect"),
           (autotest.bisect.nightly, "run_nightly_bisect"), (autotest.calibration.promote, "promote"),
           (autotest.judge.verdict, "compare_paths")]
#: a file where a folder is expected: made once, read-only to the tests
A_FILE = Path(__file__).resolve()
CASES = [(option, command) for option in OPTIONS if option.kind != FLAG for command in option.commands]

CONTROL = st.sampled_from(["\x1b[31m", "\n", "\x00", "\r", "\x7f", "\x9b"])
NOT_WHOLE = st.one_of(st.sampled_from(["", " ", "1.5", "1e3", "0x10", "seven", "١٢", "½", "1_000", "--"]),
                      st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: not float(x).is_integer()
                                                                              ).map(repr),
                      st.text(string.ascii_letters, min_size=1, max_size=8))


def bad_values(option: Option) -> st.SearchStrategy[str]:
    """Values the declaration refuses, of the option's kind."""
    empty = st.sampled_from(["", "  "])
    with_control = st.tuples(st.text(string.ascii_letters, max_size=4), CONTROL).map("".join)
    if option.kind == COUNT:
        low, high = int(option.minimum), int(option.maximum)
        return st.one_of(st.integers(max_value=low - 1).map(str), st.integers(min_value=high + 1).map(str),
                         NOT_WHOLE)
    if option.kind == NUMBER:
        beyond = [st.floats(max_value=option.minimum, exclude_max="positive" not in option.range_text)]
        if option.maximum is not None and option.maximum != float("inf"):
            beyond.append(st.floats(min_value=option.maximum, exclude_min=True, allow_infinity=True))
        return st.one_of(*[s.map(repr) for s in beyond], st.sampled_from(["nan", "", "ten", "1,5", "١"]))
    if option.kind == FOLDER:
        return st.one_of(st.sampled_from([str(A_FILE), str(A_FILE / "sub")]), empty, with_control)
    if option.kind == PAIRS:
        no_pair = st.text(string.ascii_letters + string.digits, max_size=6)  # no "=" at all
        keyless = st.text(string.ascii_letters, max_size=4).map(lambda v: f"={v}")
        if option.field == "launch.env":
            keyless = st.one_of(keyless, st.sampled_from(["A;touch X=1", "1A=2", "A B=1", "$(x)=1", "é=1"]))
        return st.one_of(no_pair, keyless, with_control)
    if option.kind == SEEDS:
        return st.one_of(st.integers(max_value=-1).map(str), st.integers(min_value=2**32).map(str), NOT_WHOLE,
                         st.integers(0, 100).map(lambda s: f"{s},{s}"), st.just("1,,2"))
    assert option.kind == TEXT, option
    if option.pattern is not None:
        return st.one_of(empty, with_control, st.sampled_from(["-x", "a b", "$(touch x)", "a;b", "`x`"]))
    return st.one_of(empty, with_control)


@pytest.fixture(autouse=True)
def no_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("a runner was called: the bad value was not refused before the run")

    for module, name in RUNNERS:
        monkeypatch.setattr(module, name, refuse)


@pytest.mark.parametrize("option, command", CASES, ids=[f"{c}:{o.flag}" for o, c in CASES])
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # the runners stay refused throughout
@given(data=st.data())
def test_a_bad_value_of_any_declared_flag_is_one_line_before_anything_runs(option: Option, command: str, data
                                                                        ) -> None:
    value = data.draw(bad_values(option), label=option.flag)
    argv = [*command.split(), *REQUIRED[command], f"{option.flag}={value}"]
    out, errors = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(errors):
        code = main(argv)
    err = errors.getvalue()
    lines = err.strip("\n").splitlines()
    assert code == 2, (argv, err)
    assert len(lines) == 1 and lines[0].startswith(f"rl-autotest: error: {option.flag}"), (argv, err)
    assert "Traceback" not in err


def test_every_count_flag_declares_its_bounds() -> None:
    """replicates, runs, seeds, jobs, budgets: each count has a floor and a ceiling in the declaration."""
    for option in OPTIONS:
        if option.kind in (COUNT, NUMBER):
            assert option.minimum is not None and option.maximum is not None, option.flag
