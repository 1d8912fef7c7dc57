"""The rule for a recipe the commit under test lacks: skip, run at the case's pin, or refuse a broken pin."""

from __future__ import annotations

from autotest.run.recipe_presence import PIN, REFUSE, RUN, SKIP, Absent, FrameworkAt, decide

MAIN = FrameworkAt("xtuner", "b934f462095c1e750229de35367c50ae36caa786", "refs/heads/main", "RL_AUTOTEST_FRAMEWORK_REF")
PINNED = FrameworkAt("xtuner", "c77eddc96e56fed872d50d8ba5deed1f962c696c", "c77eddc96e56fed872d50d8ba5deed1f962c696c",
                     "case file")
RECIPE = Absent(("recipe/on_policy_distillation/",))


def test_nothing_of_the_framework_missing_runs():
    assert decide(Absent(), MAIN, None).action == RUN
    assert decide(Absent(elsewhere=2), MAIN, "c77eddc9").action == RUN  # preflight fails the shares fast


def test_a_missing_share_beside_a_missing_recipe_still_fails_fast():
    assert decide(Absent(("recipe/on_policy_distillation/",), elsewhere=1), MAIN, None).action == RUN


def test_a_recipe_folder_not_there_yet_is_a_skip_naming_the_commit_and_ref():
    decision = decide(RECIPE, MAIN, None)
    assert decision.action == SKIP
    assert decision.reason == ("recipe/on_policy_distillation/ is not in xtuner at "
                               "b934f462095c1e750229de35367c50ae36caa786 (refs/heads/main): not merged yet?")


def test_a_file_missing_from_a_recipe_that_is_there_may_be_a_rename():
    decision = decide(Absent(("recipe/on_policy_distillation/config/old.py", "recipe/x/")), MAIN, None)
    assert decision.reason.endswith("are not in xtuner at b934f462095c1e750229de35367c50ae36caa786 "
                                    "(refs/heads/main): renamed, or not merged yet?")


def test_a_pin_is_tried_and_says_why():
    decision = decide(RECIPE, MAIN, "c77eddc96e56fed872d50d8ba5deed1f962c696c")
    assert (decision.action, decision.reason) == (
        PIN, "the case's platform.framework.ref, since refs/heads/main (b934f462095c) lacks "
             "recipe/on_policy_distillation/")


def test_a_pinned_commit_without_the_recipe_is_refused():
    decision = decide(RECIPE, PINNED, None, at_pin=True)
    assert decision.action == REFUSE
    assert decision.reason.startswith("recipe/on_policy_distillation/ is not in xtuner at c77eddc96e56fed872d50d8ba5dee")
    assert "the pin is broken; pin a commit that has them" in decision.reason
