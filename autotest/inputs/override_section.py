"""The ``overrides:`` lists of a baseline (a check's per-hardware thresholds, ``wall_time``'s per-hardware limits),
read against their declaration in :mod:`autotest.inputs.baseline_schema`; what they mean and how a node picks one
is :mod:`autotest.inputs.hardware_overrides`."""

from __future__ import annotations

from collections.abc import Callable

from autotest.inputs.baseline_schema import keys_of, read
from autotest.inputs.hardware_overrides import HardwareOverride, words
from autotest.inputs.schema import Section, show


def parse_overrides(sec: Section, declared: str, *,
                    validate: Callable[[Section, float], None] | None = None) -> tuple[HardwareOverride, ...]:
    """``sec.overrides`` (absent: none); each entry is ``{hardware: {gpu, count}, <value key>: number}`` as
    ``declared`` (``checks[].overrides[]`` or ``wall_time.overrides[]``) declares it.

    ``validate(entry, value)`` checks a value as the default's would be (it fails through ``entry``).
    """
    required, optional = keys_of(declared)
    value_key = next(name for name in required if name != "hardware")
    hardware_keys = keys_of(f"{declared}.hardware")
    raw = sec.get("overrides", None)
    if raw is None:
        return ()
    example = f'[{{hardware: {{gpu: "H200", count: 8}}, {value_key}: 15}}]'
    if not isinstance(raw, list) or not raw:
        sec.fail("overrides", f"{show(raw)} is not a non-empty list", f"write e.g. {example}")
    found: list[HardwareOverride] = []
    for i, item in enumerate(raw):
        entry = Section(item, sec.path, sec.key(f"overrides[{i}]"), doc=sec.doc)
        entry.check_keys(required=required, optional=optional)
        hardware = entry.section("hardware")
        assert hardware is not None
        hardware.check_keys(required=hardware_keys[0], optional=hardware_keys[1])
        gpu = read(hardware, f"{declared}.hardware.gpu")
        if not words(gpu):
            hardware.fail("gpu", f"{show(gpu)} names no GPU model", 'write the model as nvidia-smi -L shows it, e.g. "H200"')
        count = read(hardware, f"{declared}.hardware.count")
        value = read(entry, f"{declared}.{value_key}")
        if validate is not None:
            validate(entry, value)
        override = HardwareOverride(gpu=gpu, count=count, value=value)
        if any(words(o.gpu) == words(gpu) and o.count == count for o in found):
            entry.fail("hardware", f"{override.describe()} is listed twice", "keep one override per hardware")
        found.append(override)
    return tuple(found)
