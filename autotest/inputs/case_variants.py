"""A case's ``equivalence:`` section: variants of its launch that must train the same as the case itself.

    equivalence:
      - name: grad-accum-4
        description: the global batch in 4 micro-batches (gradient accumulation) trains as one batch
        args: [--micro-batches, "4"]     # appended to launch.command
        env: {}                          # added to launch.env

``rl-autotest ab CASE --base clean --head variant:grad-accum-4`` judges a variant against the case by the paired
A/B gates (docs/ab.md); a variant that trains differently beyond the A/A noise is a broken equivalence.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from autotest.inputs.schema import Section, show

if TYPE_CHECKING:
    from autotest.inputs.case_model import Case, Launch

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


def parse_variants(top: Section) -> tuple[Variant, ...]:
    raw = top.get("equivalence", None)
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        top.fail("equivalence", f"{show(raw)} is not a non-empty list", "write one {name, description, args} per variant")
    variants: list[Variant] = []
    for i, item in enumerate(raw):
        sec = Section(item, top.path, top.key(f"equivalence[{i}]"), doc=top.doc, required=("name", "description"),
                      optional=("args", "env"))
        name = sec.text("name")
        if not _NAME.fullmatch(name):
            sec.fail("name", f"{name!r} is not a variant name", "use lowercase letters, digits, '.', '_' and '-'")
        if any(v.name == name for v in variants):
            sec.fail("name", f"duplicate variant {name!r}", "give each variant its own name")
        variant = Variant(name, sec.text("description"), sec.str_list("args", default=()),
                          sec.str_map("env", default={}))
        if not variant.args and not variant.env:
            sec.fail("args", "the variant changes nothing (no args, no env)", "give the args or env that make it")
        variants.append(variant)
    return tuple(variants)


def find_variant(case: Case, name: str) -> Variant | None:
    return next((v for v in case.variants if v.name == name), None)


def with_variant(case: Case, variant: Variant) -> Case:
    """``case`` launched as ``variant``: its args after the command, its env over the launch's."""
    return with_launch_args(case, variant.args, variant.env)


def with_launch_args(case: Case, args: tuple[str, ...], env: dict[str, str] | None = None) -> Case:
    """``case`` with ``args`` after its launch command and ``env`` over its launch env."""
    launch: Launch = case.launch
    command = (f"{launch.command} {shlex.join(args)}" if isinstance(launch.command, str)
               else (*launch.command, *args))
    return replace(case, launch=replace(launch, command=command, env={**launch.env, **(env or {})}))
