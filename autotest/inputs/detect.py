"""A case's ``detect:`` targets against its baseline: each must name a metric the baseline checks.

The case file alone cannot tell a typo from a metric (its names live in the baseline), so the check runs
wherever both are loaded (``power``, ``calibrate``, ``run``): an unknown metric is one line with the closest
checked names, never "no gate has a minimum detectable effect" later.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Mapping, Sequence

from autotest.errors import UsageError
from autotest.inputs.schema import printable


def check_detect_targets(targets: Mapping[str, float], checked: Sequence[str], case_file: Path,
                         baseline_file: Path) -> None:
    """Raise one line for the first ``detect:`` metric that no check of the baseline names."""
    known = sorted(set(checked))
    for metric in targets:
        if metric in known:
            continue
        close = difflib.get_close_matches(metric, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UsageError(f"{case_file}: detect.{printable(metric)}: not a metric {baseline_file} checks "
                         f"({', '.join(known) or 'none'}); {hint}name a checked metric, or add a check for it")
