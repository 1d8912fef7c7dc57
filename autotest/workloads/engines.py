"""Where the rollout engine and the trainer live: this process, or two Ray actors.

Both placements expose the same calls to the GRPO driver. Every random stream is owned by
the component that draws from it and each component runs with the same thread count in
either placement, so a Ray run is bitwise the same as a local run with the same seed.
In Ray mode the weights go from the trainer actor to the rollout actor as an object-store
reference (the trainer's return value), never through the driver.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotest.workloads.observer import ForwardObserver, build_observer
from autotest.workloads.rollout import RolloutEngine
from autotest.workloads.trainer import Trainer

if TYPE_CHECKING:
    import torch

    from autotest.workloads.rollout import RolloutBatch
    from autotest.workloads.tasks import Judge, Prompt
    from autotest.workloads.trainer import TrainResult


class LocalEngines:
    """Rollout engine and trainer in this process, sharing one observer."""

    def __init__(
        self, rollout_kwargs: Mapping[str, Any], trainer_kwargs: Mapping[str, Any], diagnostic: Mapping[str, Any] | None
    ) -> None:
        self.observer: ForwardObserver = build_observer(diagnostic)
        self.rollout = RolloutEngine(**rollout_kwargs, observer=self.observer)
        self.trainer = Trainer(**trainer_kwargs, observer=self.observer)

    def sync(self, version: int) -> None:
        """Send the trainer's weights to the rollout engine."""
        self.rollout.load_weights(self.trainer.state_dict(), version)

    def generate(self, prompts: Sequence[Prompt], samples_per_prompt: int, step: int) -> RolloutBatch:
        """Sample a batch."""
        return self.rollout.generate(prompts, samples_per_prompt, step)

    def observe_prefill(self, batch: RolloutBatch, step: int) -> None:
        """Diagnostic rollout-side forwards."""
        self.rollout.observe_prefill(batch, step)

    def evaluate(self, prompts: Sequence[Prompt], judge: Judge) -> float:
        """Greedy eval accuracy."""
        return self.rollout.evaluate(prompts, judge)

    def evaluate_sampled(self, prompts: Sequence[Prompt], judge: Judge, samples_per_prompt: int,
                         eval_seed: int) -> float:
        """Sampled eval pass@1."""
        return self.rollout.evaluate_sampled(prompts, judge, samples_per_prompt, eval_seed)

    def train_step(self, batch: RolloutBatch, rewards: torch.Tensor, step: int, observe: bool) -> TrainResult:
        """One trainer step."""
        return self.trainer.train_step(batch, rewards, step, observe)

    def checkpoint_state(self) -> dict[str, Any]:
        """Both components' checkpoint parts."""
        return {"rollout": self.rollout.checkpoint_state(), "trainer": self.trainer.checkpoint_state()}

    def load_checkpoint_state(self, state: Mapping[str, Any]) -> None:
        """Restore both components from :meth:`checkpoint_state`."""
        self.rollout.load_checkpoint_state(state["rollout"])
        self.trainer.load_checkpoint_state(state["trainer"])

    def close(self) -> None:
        """Close the observer."""
        self.observer.close()


class _Actor:
    """A Ray actor holding one component; the driver calls its methods by name."""

    def __init__(self, kind: str, kwargs: Mapping[str, Any], diagnostic: Mapping[str, Any] | None) -> None:
        cls = {"rollout": RolloutEngine, "trainer": Trainer}[kind]
        self.observer = build_observer(diagnostic)
        self.component = cls(**kwargs, observer=self.observer)

    def call(self, method: str, *args: Any) -> Any:
        return getattr(self.component, method)(*args)

    def close(self) -> None:
        self.observer.close()


def _package_root() -> str:
    """The directory that holds the ``autotest`` package (for the actors' PYTHONPATH)."""
    return str(Path(__file__).resolve().parents[2])


class RayEngines:
    """Rollout engine and trainer as two Ray actors on a local (or joined) Ray cluster.

    Without ``RAY_ADDRESS`` a private single-node Ray is started on 127.0.0.1 with its own
    short temp dir, and ``close`` stops it and removes the dir. With ``RAY_ADDRESS`` the
    driver joins that cluster and only disconnects.
    """

    def __init__(
        self, rollout_kwargs: Mapping[str, Any], trainer_kwargs: Mapping[str, Any], diagnostic: Mapping[str, Any] | None
    ) -> None:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        import ray

        self._ray = ray
        self._temp_dir: str | None = None
        pythonpath = os.pathsep.join(p for p in (_package_root(), os.environ.get("PYTHONPATH", "")) if p)
        runtime_env = {"env_vars": {"PYTHONPATH": pythonpath}}
        address = os.environ.get("RAY_ADDRESS")
        if address:
            ray.init(address=address, runtime_env=runtime_env, log_to_driver=True)
        else:
            # Short: Ray's socket paths under the temp dir must stay below ~107 characters.
            self._temp_dir = tempfile.mkdtemp(prefix="rtg", dir="/tmp")
            ray.init(
                address="local",
                num_cpus=2,
                include_dashboard=False,
                _temp_dir=self._temp_dir,
                _node_ip_address="127.0.0.1",
                runtime_env=runtime_env,
                log_to_driver=True,
            )
            print(f"[tiny-grpo] started a local Ray in {self._temp_dir}", flush=True)
        try:
            actor = ray.remote(num_cpus=1)(_Actor)
            self.rollout = actor.remote("rollout", dict(rollout_kwargs), diagnostic)
            self.trainer = actor.remote("trainer", dict(trainer_kwargs), diagnostic)
        except BaseException:
            self._stop()
            raise

    def _get(self, ref: Any) -> Any:
        return self._ray.get(ref)

    def sync(self, version: int) -> None:
        """Send the trainer's weights to the rollout engine through the object store."""
        self._get(self.rollout.call.remote("load_weights", self.trainer.call.remote("state_dict"), version))

    def generate(self, prompts: Sequence[Prompt], samples_per_prompt: int, step: int) -> RolloutBatch:
        """Sample a batch."""
        return self._get(self.rollout.call.remote("generate", list(prompts), samples_per_prompt, step))

    def observe_prefill(self, batch: RolloutBatch, step: int) -> None:
        """Diagnostic rollout-side forwards."""
        self._get(self.rollout.call.remote("observe_prefill", batch, step))

    def evaluate(self, prompts: Sequence[Prompt], judge: Judge) -> float:
        """Greedy eval accuracy."""
        return self._get(self.rollout.call.remote("evaluate", list(prompts), judge))

    def evaluate_sampled(self, prompts: Sequence[Prompt], judge: Judge, samples_per_prompt: int,
                         eval_seed: int) -> float:
        """Sampled eval pass@1."""
        return self._get(self.rollout.call.remote("evaluate_sampled", list(prompts), judge, samples_per_prompt,
                                                  eval_seed))

    def train_step(self, batch: RolloutBatch, rewards: torch.Tensor, step: int, observe: bool) -> TrainResult:
        """One trainer step."""
        return self._get(self.trainer.call.remote("train_step", batch, rewards, step, observe))

    def checkpoint_state(self) -> dict[str, Any]:
        """Both actors' checkpoint parts (through the object store)."""
        rollout, trainer = self._get([self.rollout.call.remote("checkpoint_state"),
                                      self.trainer.call.remote("checkpoint_state")])
        return {"rollout": rollout, "trainer": trainer}

    def load_checkpoint_state(self, state: Mapping[str, Any]) -> None:
        """Restore both actors from :meth:`checkpoint_state`."""
        self._get([self.rollout.call.remote("load_checkpoint_state", state["rollout"]),
                   self.trainer.call.remote("load_checkpoint_state", state["trainer"])])

    def close(self) -> None:
        """Close both observers, then stop (or leave) Ray and remove the private temp dir."""
        try:
            self._get([self.rollout.close.remote(), self.trainer.close.remote()])
        finally:
            self._stop()

    def _stop(self) -> None:
        self._ray.shutdown()
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
