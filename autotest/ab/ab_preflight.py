"""Everything an A/B checks before its first run: the seeds, the environment, both sides' refs and the baseline's
paired section. A mistake in any of them is one UsageError naming the flag (or the file and key) the user wrote,
never a refusal after the base side already ran (:func:`autotest.ab.interleave.run_ab` calls
:func:`check_before_runs` first; ``rl-autotest ab`` reads its seeds and ``--env`` through :func:`ab_seeds` and
:func:`ab_env`)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from autotest.ab.sides import Side
from autotest.errors import UsageError
from autotest.inputs.baseline_model import Baseline
from autotest.inputs.case import Case, case_argument
from autotest.inputs.replicate_limits import REPLICATE_CAPS, platform_kind
from autotest.inputs.run_limits import AB_DEFAULT_SEEDS as DEFAULT_SEEDS
from autotest.inputs.run_limits import AB_FIRST_SEED as FIRST_AB_SEED
from autotest.inputs.run_limits import CountLimit, check_count, parse_seeds
from autotest.inputs.schema import NAME


def seeds_cap(case: Case) -> int:
    """The most seeds per side: the replicates cap of the case's platform (one verdict's runs, per side)."""
    return REPLICATE_CAPS[platform_kind(case.platform.gpus)]


def ab_seeds(case: Case, seeds: str | Sequence[int] | None, replicates: int | None) -> tuple[int, ...]:
    """The seeds both sides run: ``--seeds`` as given (text, or as the flag table parsed it), else ``--replicates``
    (default 3) seeds from 11 on; at most the case's platform cap either way."""
    cap = seeds_cap(case)
    if seeds is not None and replicates is not None:
        raise UsageError("--seeds and --replicates: give one (the seeds, or how many)")
    if isinstance(seeds, str):
        return parse_seeds(seeds, "--seeds", cap)
    if seeds is not None:
        return parse_seeds(",".join(str(s) for s in seeds), "--seeds", cap)
    count = DEFAULT_SEEDS if replicates is None else replicates
    check_count("--replicates", count, limit=CountLimit(1, cap, "give the number of seeds per side"))
    return tuple(range(FIRST_AB_SEED, FIRST_AB_SEED + count))


def ab_env(items: Sequence[str], flag: str = "--env") -> dict[str, str]:
    """``KEY=VALUE`` items as an environment; a KEY that is not a variable name is refused (it reaches the launch)."""
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{flag}: {item!r} is not KEY=VALUE")
        if not NAME.fullmatch(key):
            raise UsageError(f"{flag}: {key!r} is not a variable name; write KEY=VALUE with KEY of letters, digits "
                             "and _ (not starting with a digit)")
        env[key] = value
    return env


def check_before_runs(case: Case, sides: Sequence[Side], baseline: Baseline,
                      environ: Mapping[str, str] | None = None) -> None:
    """Both refs resolved (fetched into the framework cache) and the paired section present, before any run."""
    environ = os.environ if environ is None else environ
    for side in sides:
        resolve_ref(case, side, environ)
    if baseline.paired is None:
        raise UsageError(f"{baseline.path}: paired: missing: an A/B judges head - base against the A/A noise of "
                         f"this section; run `rl-autotest calibrate {case_argument(case)} --paired` (A/A pairs) to "
                         "measure it, or pass --baselines-dir with a baseline that has it")


def resolve_ref(case: Case, side: Side, environ: Mapping[str, str]) -> None:
    """The side's framework ref fetched now (the runs reuse the checkout); a ref that does not resolve is one line
    naming the side's flag (``--base``/``--head``), not the ``--framework-ref`` the run would pass it as."""
    if side.framework_ref is None:
        return
    from autotest.run.framework import checkout, default_cache_dir, framework_request

    flag = f"--{side.label}"
    try:
        request = framework_request(case, environ, ref=side.framework_ref)
        if request is not None:
            checkout(request, default_cache_dir(environ))
    except UsageError as exc:
        message = str(exc).removeprefix("--framework-ref: ").replace("--framework-ref", flag)
        raise UsageError(f"{flag} {side.framework_ref!r}: {message}") from None
