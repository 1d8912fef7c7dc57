"""What a step's training prompts are made of, logged beside the training metrics (issue 44): how many prompts the
data loader handed over, how many distinct ones, how many repeats, how many from each source, and a digest of their
order. They are read from the prompts only, after the step's prompts are final, so logging them changes nothing the
run trains.

| key | value |
|---|---|
| ``data/prompts`` | prompts the step trains on (before each is sampled ``samples_per_prompt`` times) |
| ``data/distinct_prompts`` | distinct drawn prompts among them |
| ``data/repeated_prompts`` | ``data/prompts`` - ``data/distinct_prompts``: prompts handed over again within the step |
| ``data/source/<data_source>`` | prompts of each source (task) |
| ``data/prompt_digest`` | CRC-32 of the prompts' token ids in order (an integer below 2**32, exact in a float) |

A prompt is one draw of the sampler, as a dataset row is one row: the tiny tasks have only 9 distinct prompt texts
per source, so 64 draws always hold all of them and a count of distinct texts could never move. A prompt handed
over twice (the same draw) is a repeat; one a hook builds anew is a draw of its own. The digest reads the prompts'
texts, so two runs that drew the same prompts in the same order have the same digest (a resumed run's first step
against the uninterrupted run's).
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autotest.workloads.tasks import Prompt

PROMPTS = "data/prompts"
DISTINCT = "data/distinct_prompts"
REPEATED = "data/repeated_prompts"
SOURCE_PREFIX = "data/source/"
DIGEST = "data/prompt_digest"


def prompt_digest(prompts: Sequence[Prompt]) -> int:
    """CRC-32 of the prompts' token ids in order (each prompt closed by a separator, so order and bounds count)."""
    crc = 0
    for p in prompts:
        crc = zlib.crc32(b"".join(t.to_bytes(4, "little") for t in p.token_ids) + b"\xff" * 4, crc)
    return crc


def composition_metrics(prompts: Sequence[Prompt]) -> dict[str, float]:
    """The ``data/*`` metrics of the prompts a step trains on; a prompt is identified by its draw (the object the
    sampler made), see the module docstring."""
    distinct = len({id(p) for p in prompts})
    sources = Counter(p.data_source for p in prompts)
    return {PROMPTS: float(len(prompts)), DISTINCT: float(distinct), REPEATED: float(len(prompts) - distinct),
            **{f"{SOURCE_PREFIX}{s}": float(n) for s, n in sorted(sources.items())},
            DIGEST: float(prompt_digest(prompts))}
