"""The resume faults of the catalogue: a resumed process that leaves one part of its checkpoint unrestored.

Each acts only where a run resumes from a checkpoint (``--resume-from``, :mod:`.checkpoint`): the run that saves
the checkpoint is bitwise a healthy run, so every gate of the main run passes and only the harness's resume phase
(:mod:`autotest.run.resume_launch`, compared by :mod:`autotest.judge.resume`) can see them. The registry and table are
:mod:`.faults`.
"""

from __future__ import annotations

from autotest.workloads.fault_hooks import REWARDS, FaultHooks

#: the triage rule that names a resume that did not continue (autotest.judge.triage)
RESUME = "resume"
LOSS = "train_metrics/worker_0/loss"
LR = "train_metrics/worker_0/lr"
DIGEST = "data/prompt_digest"


class ResumeNoOptimizer(FaultHooks):
    """A resumed run does not restore the optimiser state: Adam restarts with empty moments at step K+1.

    The first resumed step samples exactly what the uninterrupted run sampled (weights and RNG restored), so its
    rollout metrics are equal; its updates are not, and everything after follows.
    """

    name = "resume-no-optimizer"
    expected = {
        "verdict": "FAIL",
        "breached": [LOSS, REWARDS],
        "triage": RESUME,
        "measured": "seed 0, checkpoint after step 20: step 21's rewards, lengths, entropy and k3 bitwise those of "
        "the uninterrupted run, its mean mini-batch loss not; rewards differ from step 22; the main run passes",
    }

    def restored_parts(self, component: str, parts: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(p for p in parts if not (component == "trainer" and p == "optimizer"))


class ResumeLrRestart(FaultHooks):
    """A resumed run restarts the LR schedule: step K+1 trains at the step-1 learning rate."""

    name = "resume-lr-restart"
    expected = {
        "verdict": "FAIL",
        "breached": [LR, LOSS],
        "triage": RESUME,
        "measured": "seed 0, checkpoint after step 20: lr at step 21 is 1e-3 (the uninterrupted run's 5.9e-4); "
        "step 21's rollout metrics and first mini-batch equal, its later mini-batches not; the main run passes",
    }

    def restored_parts(self, component: str, parts: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(p for p in parts if not (component == "trainer" and p == "scheduler"))


class ResumeRngReset(FaultHooks):
    """A resumed run does not restore its RNG: prompt order, rollout sampling and mini-batch order start again
    from the seed, as in a fresh process."""

    name = "resume-rng-reset"
    expected = {
        "verdict": "FAIL",
        "breached": [REWARDS, "response/response_len/mean"],
        "triage": RESUME,
        "cause": "the prompt order",
        "measured": "seed 0, checkpoint after step 20: step 21 already samples other prompts and responses "
        "(rewards, lengths, entropy differ at the first resumed step); the main run passes",
    }

    def restored_parts(self, component: str, parts: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(p for p in parts if p != "rng")


class ResumePromptOrder(FaultHooks):
    """A resumed run does not restore the data sampler's state: the prompt order starts again from the seed while the
    rollout's sampling RNG, the weights and the optimiser are restored (a data loader left out of the checkpoint)."""

    name = "resume-prompt-order"
    expected = {
        "verdict": "FAIL",
        "breached": [REWARDS, DIGEST],
        "triage": RESUME,
        "cause": "the prompt order",
        "measured": "seed 0, checkpoint after step 2 of 6 (8 prompts x 4): step 3's data/prompt_digest differs, its "
        "k3 within 10 x the uninterrupted run's largest; the main run passes",
    }

    def restored_parts(self, component: str, parts: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(p for p in parts if not (component == "driver" and p == "rng"))


class ResumeSamplingRng(FaultHooks):
    """A resumed run does not restore the rollout engine's sampling RNG: the same prompts are sampled from a generator
    seeded afresh, while the prompt order, the weights and the optimiser are restored."""

    name = "resume-sampling-rng"
    expected = {
        "verdict": "FAIL",
        "breached": [REWARDS, "response/response_len/mean"],
        "triage": RESUME,
        "cause": "the sampling RNG",
        "measured": "seed 0, checkpoint after step 2 of 6 (8 prompts x 4): step 3's data/prompt_digest bitwise the "
        "uninterrupted run's, its k3 within 10 x the run's largest, its length differs; the main run passes",
    }

    def restored_parts(self, component: str, parts: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(p for p in parts if not (component == "rollout" and p == "rng"))


class ResumeRolloutWeights(FaultHooks):
    """A resumed run does not load the rollout engine's weights (the resume restores the trainer and skips the sync
    to the engine): the first resumed step samples with the engine's initial weights, the trainer holds step K's."""

    name = "resume-rollout-weights"
    expected = {
        "verdict": "FAIL",
        "breached": [REWARDS, "mismatch/mismatch_k3_kl"],
        "triage": RESUME,
        "cause": "the rollout engine's weights",
        "measured": "seed 0, checkpoint after step 2 of 6 (8 prompts x 4): step 3's data/prompt_digest bitwise the "
        "uninterrupted run's, its k3 over 1e6 x the run's largest; the main run passes",
    }

    def restored_parts(self, component: str, parts: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(p for p in parts if not (component == "rollout" and p == "model"))


RESUME_FAULTS = (ResumeNoOptimizer, ResumeLrRestart, ResumeRngReset, ResumePromptOrder, ResumeSamplingRng,
                 ResumeRolloutWeights)
