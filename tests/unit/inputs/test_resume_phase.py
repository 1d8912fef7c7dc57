"""The case's ``resume:`` section: the packaged case declares one, each bad key is one pinned line."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.case import load_case
from tests.unit.inputs.test_case import write_case

GOOD = """resume:
  at_step: 1
  steps: 2
  checkpoint_args: [--save-at, "{resume_step}", --dir, "{checkpoint_dir}"]
  resume_args: [--resume-from, "{checkpoint_dir}", --stop-at, "{resume_last_step}"]
"""


def _case(tmp_path: Path, section: str, tracker: str = ""):
    path = write_case(tmp_path, tail=section)
    if tracker:
        path.write_text(path.read_text().replace("tracker: {format: xtuner}", tracker))
    return load_case(path)


def test_the_packaged_grpo_case_checkpoints_and_resumes_a_few_steps():
    resume = load_case("tiny-grpo").resume
    assert resume is not None and resume.match == "bitwise"
    assert (resume.at_step, resume.last_step) == (20, 23)
    assert resume.roles["train_metrics/worker_0/lr"] == "learning_rate"


def test_a_case_without_the_section_has_no_resume_phase(tmp_path):
    assert _case(tmp_path, "").resume is None


def test_a_minimal_section_loads_with_its_defaults(tmp_path):
    resume = _case(tmp_path, GOOD).resume
    assert resume.match == "bitwise" and resume.noise_ratio == 0.5 and resume.timeout_s is None
    assert resume.resume_args[1] == "{checkpoint_dir}"  # expanded when the run is resolved, not on load


@pytest.mark.parametrize("change,message", [
    (("at_step: 1", "at_step: 3"), "resume.at_step: 3 is not before the run's last step (3, expected.steps); "
                                   "checkpoint at an earlier step"),
    (("at_step: 1", "at_step: 0"), "resume.at_step: 0 is below 1;"),
    (("steps: 2", "steps: 5"), "resume.steps: at_step + steps = 6 is past the run's last step (3); "
                               "resume for at most 2 steps"),
    (("steps: 2", "steps: two"), "resume.steps: 'two' is not a whole number;"),
    (("  steps: 2\n", "  steps: 2\n  match: exact\n"), "resume.match: 'exact' is not one of bitwise, noise;"),
    (("  steps: 2\n", "  steps: 2\n  noise_ratio: 0.3\n"), "resume.noise_ratio: applies to match: noise only;"),
    (("  steps: 2\n", "  steps: 2\n  match: noise\n  noise_ratio: -1\n"), "resume.noise_ratio: -1 is not above 0;"),
    (("  steps: 2\n", "  steps: 2\n  roles: {lr: learning_rat}\n"),
     "resume.roles.lr: 'learning_rat' is not a role; did you mean 'learning_rate'?"),
    (("  steps: 2\n", "  steps: 2\n  timeout_s: 0\n"), "resume.timeout_s: 0 is not above 0;"),
    (("  steps: 2\n", "  steps: 2\n  checkpoint: x\n"), "resume.checkpoint: unknown key; did you mean "
                                                        "'checkpoint_args'?"),
    (('"{resume_step}"', '"{resume_stp}"'), "resume.checkpoint_args[1]: unknown placeholder {resume_stp}; "
                                             "did you mean {resume_step}?"),
    (('--resume-from, "{checkpoint_dir}"', '--resume-from, "{work_dir}/ckpt"'),
     "resume.resume_args: does not use {checkpoint_dir};"),
    (("resume_args: [--resume-from", "resume_args: []\n  x: [--resume-from"), "resume.x: unknown key"),
    (('resume_args: [--resume-from, "{checkpoint_dir}", --stop-at, "{resume_last_step}"]', "resume_args: []"),
     "resume.resume_args: is empty;"),
    (("  at_step: 1\n", ""), "resume.at_step: required key is missing;"),
])
def test_each_bad_key_is_one_line_naming_file_and_key(tmp_path, change, message):
    old, new = change
    assert old in GOOD
    with pytest.raises(UsageError) as err:
        _case(tmp_path, GOOD.replace(old, new, 1))
    text = str(err.value)
    assert "\n" not in text and text.startswith(str(tmp_path / "c.yaml") + ": ")
    assert message in text, text


def test_a_tracker_path_shared_by_both_runs_is_refused(tmp_path):
    with pytest.raises(UsageError, match=r"c.yaml: resume: tracker.path '/tmp/one.jsonl' would be one log for "
                                         r"both runs; put \{work_dir\} in tracker.path"):
        _case(tmp_path, GOOD, tracker="tracker: {format: xtuner, path: /tmp/one.jsonl}")
    assert _case(tmp_path, GOOD, tracker="tracker: {format: xtuner, path: '{work_dir}/t.jsonl'}").resume
