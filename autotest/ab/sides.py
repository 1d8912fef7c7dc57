"""What ``--base REF`` and ``--head REF`` name: one side of an A/B comparison.

A REF is ``+``-joined parts, each one of

- ``clean``: the case as it is (for an embedded case: the workload without a fault);
- ``fault:NAME[:ARG]``: the embedded workload with a catalogued fault or regression (a stand-in for a code
  change, as the bisect and detection benchmarks use);
- ``variant:NAME``: the case launched as one of its ``equivalence:`` variants;
- anything else: a framework ref (branch, tag, sha, ``refs/pull/N/head``), for a case that names a framework.

``variant:grad-accum-4+fault:loss-per-microbatch`` is a variant with a fault.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotest.errors import UsageError
from autotest.inputs.case import Case
from autotest.inputs.case_variants import Variant, find_variant, with_variant

CLEAN = "clean"
FAULT, VARIANT = "fault:", "variant:"


@dataclass(frozen=True)
class Side:
    """One side of an A/B: the ref as given and what it sets on the run."""

    label: str
    ref: str
    framework_ref: str | None = None
    fault: str | None = None
    variant: Variant | None = None

    def case_for(self, case: Case) -> Case:
        return with_variant(case, self.variant) if self.variant is not None else case


def parse_side(case: Case, label: str, ref: str) -> Side:
    """``ref`` for ``case`` as the ``label`` side; a REF the case cannot run is one UsageError naming the flag."""
    flag = f"--{label}"
    if not ref.strip():
        raise UsageError(f"{flag}: empty; name {CLEAN}, {FAULT}NAME, {VARIANT}NAME or a framework ref")
    framework_ref = fault = variant = None
    for part in ref.split("+"):
        if part == CLEAN:
            continue
        if part.startswith(FAULT):
            if fault is not None:
                raise UsageError(f"{flag}: {ref!r} names two faults; keep one")
            fault = part[len(FAULT):]
            if not fault:
                raise UsageError(f"{flag}: {part!r} names no fault; write fault:NAME[:ARG] (the workload's "
                                 "--list-faults lists them)")
            if not case.takes_fault:
                raise UsageError(f"{flag}: {case.name} takes no fault (its launch has no {{fault}}); name a "
                                 "framework ref or a variant")
        elif part.startswith(VARIANT):
            name = part[len(VARIANT):]
            variant = find_variant(case, name)
            if variant is None:
                known = ", ".join(v.name for v in case.variants) or "none: the case has no equivalence: section"
                raise UsageError(f"{flag}: {case.name} has no variant {name!r} (its variants: {known})")
        else:
            if case.platform.framework is None:
                raise UsageError(f"{flag}: {part!r}: {case.name} names no framework (platform.framework), "
                                 f"so no ref can be checked out; name {CLEAN}, {FAULT}NAME[:ARG] or {VARIANT}NAME")
            if framework_ref is not None:
                raise UsageError(f"{flag}: {ref!r} names two framework refs; keep one")
            framework_ref = part
    return Side(label, ref, framework_ref, fault, variant)
