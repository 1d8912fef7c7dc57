"""The checkpoints of the tiny MOPD workload: recipe, preparation, and the on-disk cache.

One *fixture* is a student and one teacher per task domain, each a real ``transformers``
checkpoint (``config.json`` + ``model.safetensors``) of the tiny Qwen3 model of the GRPO
workload, trained here by supervised fine-tuning the first time it is needed, then cached:

- ``student``: a short run on every domain: a mediocre starting point (~0.4 sampled
  accuracy), like a small instruct model. Answers are any correct two-digit pair, uniformly.
- ``<domain>_teacher``: the student trained further until it is good (>0.9) at its own
  domain in the same answer format, and as good at the other domains in its *own house
  format*: it ends those answers with the domain's neutral digit (0 for sums, 1 for
  products) before ``<eos>`` nine times out of ten.

Why the other domains in another format: a teacher from another model family knows the
other task too, but writes its answers its own way. Routing a domain's samples to the
wrong teacher (the ``teacher-swap`` fault) then doubles the distillation KL at once (the
student's ``<eos>`` is unlikely to that teacher) while the student still learns correct
answers, so rewards stay healthy: the pattern the harness must triage as "teacher path".

Cache: ``$RL_AUTOTEST_CACHE/teachers/<key>`` (default ``~/.cache/rl-autotest``). The key
hashes the recipe, the task definitions, ``RECIPE_VERSION``, the torch/transformers versions
and the source of the modules that produce the weights (``PREPARATION_MODULES``), so any
change prepares a new fixture: a cache a locally edited recipe prepared is never picked up
by the committed code (a tiny-mopd baseline was once calibrated against such a fixture, which
no cold build reproduced; docs/workloads.md "Baseline history"). A fixture is built in a temp
dir beside its final place and renamed into it (atomic), under a file lock so parallel runs
train it once; ``fixture.json`` is written last and marks it complete, with the sha256 of
each checkpoint's weights (``weights_sha256``), which the launcher prints, so a run's log
names the exact fixture it ran against. It is trained in a child process under pinned numerics
(``PINNED_NUMERICS``).

The default recipe's fixture is committed (``COMMITTED_DIR``) and used as it is: pinned numerics made one
machine's builds agree whatever kernels it was told to use, but two CPUs (an Intel and an AMD EPYC, both
AVX-512) still trained two different students from the same code, and a baseline calibrated on one failed on the
other (docs/workloads.md, "Baseline history"). 480 SFT steps at lr 1e-2 turn any last-bit difference into another
model; the fixture is the case's data, so it ships with it. Regenerate it after a change to the recipe or the
preparing modules with ``python -m autotest.workloads.teachers --refresh-committed`` and recalibrate tiny-mopd.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotest.errors import UsageError
from autotest.workloads.tasks import DigitTask, get_task
from autotest.workloads.tiny_lm import DigitTokenizer, TinyLMConfig

if TYPE_CHECKING:
    import torch

#: Bump when what a recipe produces changes outside the modules below (the cache key includes it).
RECIPE_VERSION = 2
#: The numerics a fixture is trained under, on every CPU: ATen's baseline kernels rather than the AVX2 or AVX-512
#: ones the host would pick, MKL's reproducible (CNR) code path, oneDNN held at SSE4.1, one thread. Unpinned, one
#: recipe gave three different students on one machine (AVX-512, AVX2, baseline kernels: sampled digit_sum accuracy
#: 0.49, 0.52, 0.47), so runners with different CPUs trained different fixtures and a baseline calibrated on one
#: failed on the others (docs/workloads.md, "Baseline history"). They must be set before torch is imported, so a
#: fixture is prepared in a child process (``prepare_in_child``).
PINNED_NUMERICS = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
#: modules whose code decides the fixture's weights: their source is part of the cache key
PREPARATION_MODULES = ("autotest.workloads.teachers", "autotest.workloads.tiny_lm", "autotest.workloads.tasks")
CACHE_ENV = "RL_AUTOTEST_CACHE"
#: the default recipe's fixture, committed with the package (see the module doc)
COMMITTED_DIR = Path(__file__).resolve().parent / "fixture"
STUDENT = "student"
FIXTURE_FILE = "fixture.json"
HOUSE, FOREIGN = "house", "foreign"


def teacher_name(domain: str) -> str:
    """The teacher of ``domain`` (its name in the endpoints JSON and its checkpoint dir)."""
    return f"{domain}_teacher"


@dataclass(frozen=True)
class TeacherRecipe:
    """How the fixture is trained; every field is part of the cache key."""

    domains: tuple[str, ...] = ("digit_sum", "digit_product")
    """Task domains (``tasks.TASKS`` names); one teacher each."""
    seed: int = 1234
    """Seed of the student's init and of every training batch."""
    batch_size: int = 128
    """Answers per SFT step."""
    student_steps: int = 80
    """SFT steps of the student on all domains (short: it must stay mediocre)."""
    student_lr: float = 1e-2
    """Adam learning rate of the student's SFT."""
    teacher_steps: int = 400
    """SFT steps of each teacher, starting from the student."""
    teacher_lr: float = 1e-2
    """Adam learning rate of the teachers' SFT, decayed linearly to 0 over ``teacher_steps``."""
    foreign_suffix_prob: float = 0.9
    """How often a teacher ends its answers to another domain with that domain's neutral digit."""
    eval_samples: int = 16
    """Samples per eval prompt when the fixture's accuracies are measured (fixture.json)."""
    model: TinyLMConfig = field(default_factory=TinyLMConfig)
    """Shape of every model of the fixture."""

    def key(self) -> str:
        """16 hex digits identifying what this recipe produces, with these library versions."""
        spec = {
            "recipe_version": RECIPE_VERSION,
            "recipe": dataclasses.asdict(self),
            "tasks": {d: _task_spec(get_task(d)) for d in self.domains},
            "versions": library_versions(),
            "source": preparation_source_digest(),
            "numerics": PINNED_NUMERICS,
        }
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def preparation_source_digest() -> str:
    """sha256 (16 hex digits) of the source of ``PREPARATION_MODULES``, as installed."""
    digest = hashlib.sha256()
    for name in PREPARATION_MODULES:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, name
        digest.update(Path(spec.origin).read_bytes())
    return digest.hexdigest()[:16]


def weights_digest(checkpoint: Path) -> str:
    """sha256 of a checkpoint's ``model.safetensors``: which weights a fixture holds, bit for bit."""
    return hashlib.sha256((Path(checkpoint) / "model.safetensors").read_bytes()).hexdigest()


def library_versions() -> dict[str, str]:
    """Versions that change the numbers a fixture holds (read without importing torch)."""
    out = {}
    for dist in ("torch", "transformers"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "absent"
    return out


def correct_pairs(task: DigitTask, target: int) -> list[tuple[int, int]]:
    """Every two-digit answer ``(a, b)`` the task's judge accepts for ``target``, in order."""
    eos = DigitTokenizer().eos_id
    pairs = [(a, b) for a in range(10) for b in range(10) if task.judge(target, [a, b, eos]) == 1.0]
    if not pairs:
        raise ValueError(f"task {task.data_source}: target {target} has no two-digit answer")
    return pairs


def _task_spec(task: DigitTask) -> dict[str, Any]:
    targets = sorted(set(task.train_targets) | set(task.eval_targets))
    return {
        "marker": task.marker,
        "train": list(task.train_targets),
        "eval": list(task.eval_targets),
        "answers": {str(t): correct_pairs(task, t) for t in targets},
    }


# ---------------------------------------------------------------- where fixtures live


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """``$RL_AUTOTEST_CACHE``, else ``~/.cache/rl-autotest``."""
    env = os.environ if environ is None else environ
    return Path(env[CACHE_ENV]).expanduser() if env.get(CACHE_ENV) else Path.home() / ".cache" / "rl-autotest"


@dataclass(frozen=True)
class Fixture:
    """A prepared fixture on disk."""

    root: Path
    """The fixture dir (``COMMITTED_DIR`` for the default recipe, else ``<cache>/teachers/<key>``)."""
    domains: tuple[str, ...]
    """Its domains, in recipe order."""

    @property
    def student(self) -> Path:
        """The student's checkpoint dir."""
        return self.root / STUDENT

    def teacher(self, domain: str) -> Path:
        """The checkpoint dir of ``domain``'s teacher."""
        return self.root / teacher_name(domain)

    def info(self) -> dict[str, Any]:
        """The contents of ``fixture.json`` (recipe, versions, accuracies, preparation time, weights sha256)."""
        return json.loads((self.root / FIXTURE_FILE).read_text(encoding="utf-8"))

    def weights(self) -> dict[str, str]:
        """sha256 of each checkpoint's weights as they are on disk now (student first, then teachers)."""
        names = (STUDENT, *(teacher_name(d) for d in self.domains))
        return {name: weights_digest(self.root / name) for name in names}


def open_fixture(root: Path) -> Fixture:
    """A fixture dir given explicitly (``--fixture``); a ``UsageError`` when it is not complete."""
    try:
        info = json.loads((Path(root) / FIXTURE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise UsageError(f"--fixture {root}: not a prepared teacher fixture (no readable {FIXTURE_FILE}); "
                         "omit --fixture to use the cache") from None
    return Fixture(Path(root), tuple(info["recipe"]["domains"]))


def ensure_fixture(recipe: TeacherRecipe | None = None, root: Path | None = None,
                   log: Callable[[str], None] = print) -> Fixture:
    """The cached fixture of ``recipe``, prepared first if it is not there yet."""
    from filelock import FileLock

    recipe = recipe or TeacherRecipe()
    committed = committed_fixture(recipe)
    if committed is not None:
        return committed
    folder = (root or cache_root()) / "teachers"
    target = folder / recipe.key()
    if (target / FIXTURE_FILE).is_file():
        return Fixture(target, recipe.domains)
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if (target / FIXTURE_FILE).is_file():  # another run prepared it while we waited
            return Fixture(target, recipe.domains)
        if target.exists():  # a dir without fixture.json is not ours to trust
            shutil.rmtree(target)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{target.name}-", dir=folder))
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache may be shared by CI users
        try:
            log(f"[teachers] preparing fixture {target} (first use of this recipe)")
            prepare_in_child(recipe, tmp, log)
            tmp.rename(target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return Fixture(target, recipe.domains)


def committed_fixture(recipe: TeacherRecipe) -> Fixture | None:
    """The committed fixture when it was made by ``recipe`` under this ``RECIPE_VERSION``, else None.

    Only the recipe decides, not the source digest of the cache key: the committed weights are the case's data,
    the same on every machine, and edits to the preparing modules must not silently swap them for a local build
    (``--refresh-committed`` does that on purpose)."""
    try:
        info = json.loads((COMMITTED_DIR / FIXTURE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if info.get("recipe_version") != RECIPE_VERSION or recipe_from_dict(info["recipe"]) != recipe:
        return None
    return Fixture(COMMITTED_DIR, recipe.domains)


def refresh_committed(log: Callable[[str], None] = print) -> Fixture:
    """Prepare the default recipe (pinned numerics, a child process) into ``COMMITTED_DIR``, replacing it."""
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-fixture-", dir=COMMITTED_DIR.parent))
    try:
        prepare_in_child(TeacherRecipe(), tmp, log)
        if COMMITTED_DIR.exists():
            shutil.rmtree(COMMITTED_DIR)
        tmp.chmod(0o755)
        tmp.rename(COMMITTED_DIR)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Fixture(COMMITTED_DIR, TeacherRecipe().domains)


# ---------------------------------------------------------------- training


@dataclass(frozen=True)
class _Table:
    """SFT examples of some (domain, style) mix: token ids, per-token loss mask, sampling weight."""

    ids: torch.Tensor
    mask: torch.Tensor
    weight: torch.Tensor
    prompt_len: int


def neutral_digit(task: DigitTask) -> int:
    """A digit that can end any correct answer without changing the verdict (0 for sums, 1 for products)."""
    eos = DigitTokenizer().eos_id
    for digit in range(10):
        if all(task.judge(t, [a, b, digit, eos]) == 1.0 for t in task.train_targets for a, b in correct_pairs(task, t)):
            return digit
    raise ValueError(f"task {task.data_source}: no digit keeps every answer correct")


def _examples(task: DigitTask, style: str, suffix_prob: float) -> list[tuple[list[int], float]]:
    """(prompt + answer ids, sampling weight) of one domain; the weights sum to 1.

    Every style answers with any correct pair, uniformly (the *spread* style). ``foreign``
    also writes the domain's neutral digit before ``<eos>`` with probability ``suffix_prob``:
    the same answers in another house format.
    """
    eos = DigitTokenizer().eos_id
    pad = neutral_digit(task) if style == FOREIGN else None
    out = []
    for target in task.train_targets:
        prompt = list(task.prompt(target).token_ids)
        pairs = correct_pairs(task, target)
        share = 1.0 / (len(task.train_targets) * len(pairs))
        for a, b in pairs:
            if pad is None:
                out.append((prompt + [a, b, eos], share))
            else:
                out += [(prompt + [a, b, pad, eos], share * suffix_prob),
                        (prompt + [a, b, eos], share * (1 - suffix_prob))]
    return out


def _table(mix: list[tuple[str, str, float]], suffix_prob: float) -> _Table:
    import torch

    eos, fill = DigitTokenizer().eos_id, DigitTokenizer().pad_id
    rows = [(ids, w * share) for domain, style, share in mix
            for ids, w in _examples(get_task(domain), style, suffix_prob)]
    width = max(len(ids) for ids, _ in rows)
    prompt_len = len(get_task(mix[0][0]).prompt(1).token_ids)
    ids = torch.tensor([r + [fill] * (width - len(r)) for r, _ in rows])
    # the loss covers the answer up to and including <eos>, never the padding after it
    mask = torch.tensor([[1.0 if prompt_len <= j < len(r) else 0.0 for j in range(width)][prompt_len:]
                         for r, _ in rows])
    assert all(r[-1] == eos for r, _ in rows)
    return _Table(ids, mask, torch.tensor([w for _, w in rows], dtype=torch.float64), prompt_len)


def _sft(model: torch.nn.Module, table: _Table, steps: int, lr: float, batch_size: int,
         generator: torch.Generator, decay: bool) -> float:
    """Masked next-token cross-entropy on batches drawn from ``table``; returns the last loss.

    With ``decay`` the learning rate falls linearly to 0, which sharpens the teachers' answers.
    """
    import torch

    from autotest.workloads.tiny_lm import response_logprobs

    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: 1.0 - i / steps if decay else 1.0)
    model.train()
    loss = torch.zeros(())
    for _ in range(steps):
        idx = torch.multinomial(table.weight, batch_size, replacement=True, generator=generator)
        logp, _ = response_logprobs(model, table.ids[idx], table.prompt_len)
        mask = table.mask[idx]
        loss = -(logp * mask).sum() / mask.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
    model.eval()
    return float(loss.detach())


def sampled_accuracy(model: torch.nn.Module, config: TinyLMConfig, domains: tuple[str, ...], samples: int,
                     seed: int = 0) -> dict[str, float]:
    """Share of correct answers sampled at temperature 1 on each domain's eval prompts."""
    from autotest.workloads.rollout import RolloutEngine

    engine = RolloutEngine(config, "fp32", seed, max_new_tokens=8)
    engine.load_weights({n: p.detach() for n, p in model.named_parameters()}, 0)
    out = {}
    for domain in domains:
        task = get_task(domain)
        batch = engine.generate(task.eval_prompts(), samples, 0)
        scores = [task.judge(p.target, r) for p, r in zip(batch.prompts, batch.responses(), strict=True)]
        out[domain] = round(sum(scores) / len(scores), 4)
    return out


def save_checkpoint(model: torch.nn.Module, folder: Path) -> None:
    """``save_pretrained`` without progress bars."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model.save_pretrained(folder)


def load_checkpoint(folder: Path) -> torch.nn.Module:
    """A fixture checkpoint as a ``Qwen3ForCausalLM`` in eval mode (fp32)."""
    from transformers import Qwen3ForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    return Qwen3ForCausalLM.from_pretrained(folder).eval()


def recipe_from_dict(data: Mapping[str, Any]) -> TeacherRecipe:
    """The recipe ``dataclasses.asdict`` wrote (``fixture.json``'s ``recipe``)."""
    fields = dict(data)
    return TeacherRecipe(**{**fields, "domains": tuple(fields["domains"]), "model": TinyLMConfig(**fields["model"])})


def prepare_in_child(recipe: TeacherRecipe, out_dir: Path, log: Callable[[str], None] = print) -> None:
    """``prepare`` in a fresh interpreter under ``PINNED_NUMERICS``; its lines go to ``log``."""
    command = [sys.executable, "-m", "autotest.workloads.teachers", str(out_dir),
               json.dumps(dataclasses.asdict(recipe))]
    env = {**os.environ, **PINNED_NUMERICS, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as child:
        assert child.stdout is not None
        lines = []
        for line in child.stdout:
            lines.append(line.rstrip("\n"))
            log(lines[-1])
    if child.returncode != 0:
        tail = " | ".join(lines[-3:]) or "no output"
        raise RuntimeError(f"teacher fixture preparation failed (exit {child.returncode}): {tail}")


def numerics_in_use() -> dict[str, str]:
    """The pinned numerics as this process runs them (ATen's kernel level as torch reports it)."""
    import torch

    return {"aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            **{name: os.environ.get(name, "") for name in PINNED_NUMERICS}}


def prepare(recipe: TeacherRecipe, out_dir: Path, log: Callable[[str], None] = print) -> None:
    """Train the student and the teachers of ``recipe`` and save them under ``out_dir``.

    Call it through ``prepare_in_child``: in a process not started under ``PINNED_NUMERICS``, the weights
    depend on the CPU."""
    import torch

    from autotest.workloads.tiny_lm import build_model

    torch.set_num_threads(1)
    started = time.perf_counter()
    generator = torch.Generator().manual_seed(recipe.seed)
    student = build_model(recipe.model, seed=recipe.seed)
    house = _table([(d, HOUSE, 1.0) for d in recipe.domains], recipe.foreign_suffix_prob)
    _sft(student, house, recipe.student_steps, recipe.student_lr, recipe.batch_size, generator, decay=False)
    models = {STUDENT: student}
    for own in recipe.domains:
        teacher = copy.deepcopy(student)
        mix = [(d, HOUSE if d == own else FOREIGN, 1.0) for d in recipe.domains]
        loss = _sft(teacher, _table(mix, recipe.foreign_suffix_prob), recipe.teacher_steps, recipe.teacher_lr,
                    recipe.batch_size, generator, decay=True)
        models[teacher_name(own)] = teacher
        log(f"[teachers] {teacher_name(own)} trained ({recipe.teacher_steps} steps, final loss {loss:.3f})")
    accuracy = {}
    for name, model in models.items():
        save_checkpoint(model, out_dir / name)
        accuracy[name] = sampled_accuracy(model, recipe.model, recipe.domains, recipe.eval_samples)
    info = {
        "key": recipe.key(),
        "recipe": dataclasses.asdict(recipe),
        "recipe_version": RECIPE_VERSION,
        "versions": library_versions(),
        "numerics": numerics_in_use(),
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "prepare_s": round(time.perf_counter() - started, 1),
        "accuracy": accuracy,
        "weights_sha256": {name: weights_digest(out_dir / name) for name in models},
    }
    (out_dir / FIXTURE_FILE).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    log(f"[teachers] fixture ready in {info['prepare_s']} s; sampled accuracy {json.dumps(accuracy)}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--refresh-committed"]:
        print(f"[teachers] committed fixture refreshed: {refresh_committed().weights()}; now record the teacher "
              "probe's answers from these weights: python -m autotest.workloads.probe_answers")
    else:  # the child of prepare_in_child: OUT_DIR RECIPE_JSON
        prepare(recipe_from_dict(json.loads(sys.argv[2])), Path(sys.argv[1]))
