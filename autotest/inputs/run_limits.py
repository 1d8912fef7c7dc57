"""The bounds of every seed and every count a command line takes, declared once.

A seed is a whole number in ``0 <= seed < 2**32``: the range every random generator the workloads and the
frameworks seed accepts (numpy's ``RandomState`` refuses 2**32 and above; ``torch.manual_seed`` takes more, a
negative one wraps). A count flag (``--runs``, ``--max-runs``, ``--jobs``) has a floor and a cap in :data:`COUNTS`;
the replicates of one verdict keep their per-platform cap (:data:`autotest.inputs.replicate_limits.REPLICATE_CAPS`),
which the A/B seeds per side share. Each command asks
:func:`check_count` / :func:`check_seed` / :func:`parse_seeds` before it starts a run, so a typo
(``--replicates 1000000``, ``--seeds=-1``) is one line and exit 2, never a thousand trainings.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotest.errors import UsageError

#: A/B seeds per side when neither --seeds nor --replicates is given; they start past the calibration seeds (0-9 in
#: the packaged cases), so a pair is never judged on a seed its noise was measured on
AB_DEFAULT_SEEDS, AB_FIRST_SEED = 3, 11
#: seeds are ``0 <= seed < SEED_LIMIT`` (see the module docstring)
SEED_LIMIT = 2**32
SEED_HELP = f"a whole number from 0 to {SEED_LIMIT - 1}"


@dataclass(frozen=True)
class CountLimit:
    """How many of something one flag may ask for; ``why`` follows a count below ``minimum``."""

    minimum: int
    maximum: int
    why: str = ""


#: every count flag, by flag; a cap keeps a typo from starting hundreds of trainings (or probes, or nights)
COUNTS: dict[str, CountLimit] = {
    "--runs": CountLimit(2, 64, "run-to-run noise needs at least two runs"),
    "--max-runs": CountLimit(2, 200, "the good and bad ends take two runs"),
    "--jobs": CountLimit(1, 64),
}


def check_count(flag: str, value: int, *, why: str | None = None, limit: CountLimit | None = None) -> int:
    """``value`` when it is within ``flag``'s declared bounds, else one UsageError naming the flag.

    ``why``: the reason after a count below the floor, when this command's differs from the declared one;
    ``limit``: the bounds when the flag is not in :data:`COUNTS` under that name (``--last`` counts runs).
    """
    bounds = limit or COUNTS[flag]
    if value < bounds.minimum:
        reason = bounds.why if why is None else why
        raise UsageError(f"{flag}: {value} is below {bounds.minimum}" + (f"; {reason}" if reason else ""))
    if value > bounds.maximum:
        raise UsageError(f"{flag}: {value} is above the cap of {bounds.maximum}; give at most {bounds.maximum} "
                         "(a typo here would start that many trainings)")
    return value


def check_seed(value: int, where: str) -> int:
    """``value`` when it is a seed every generator takes (see :data:`SEED_LIMIT`), else one UsageError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{where}: {value!r} is not a seed; give {SEED_HELP}")
    if value < 0:
        raise UsageError(f"{where}: {value} is below 0; give a seed >= 0")
    if value >= SEED_LIMIT:
        raise UsageError(f"{where}: {value} is not below 2**32 (random generators take 32-bit seeds); "
                         f"give {SEED_HELP}")
    return value


def parse_seeds(text: str, flag: str, cap: int) -> tuple[int, ...]:
    """``11,12,13`` as distinct seeds, at most ``cap`` of them; anything else is one UsageError naming ``flag``."""
    try:
        seeds = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise UsageError(f"{flag}: {text!r} is not a comma-separated list of whole numbers, e.g. 11,12,13") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise UsageError(f"{flag}: {text!r}: give distinct seeds, e.g. 11,12,13")
    for seed in seeds:
        check_seed(seed, flag)
    if len(seeds) > cap:
        raise UsageError(f"{flag}: {len(seeds)} seeds is above the cap of {cap} runs per side; give at most {cap}")
    return seeds
